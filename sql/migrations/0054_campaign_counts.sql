-- What a campaign's send rows came to, kept when they are pruned (docs/design.md §15): written when it
-- finishes (campaign_finish.sql) and at a prune when it has none yet (a cancelled campaign). A pruned
-- campaign has pruned_at set; its status, list line and metrics read these counts instead of einmal.sends.
CREATE TABLE einmal.campaign_counts (
    campaign_id bigint NOT NULL REFERENCES einmal.campaigns (id),
    status      text NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (campaign_id, status)
);
ALTER TABLE einmal.campaigns ADD COLUMN pruned_at timestamptz;
