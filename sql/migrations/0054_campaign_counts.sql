-- What a campaign's send rows came to, kept when they are pruned (docs/design.md#retention): written when it
-- finishes (campaign_finish.sql) and at a prune when it has none yet (a cancelled campaign). A pruned
-- campaign has pruned_at set; its status, list line and metrics read these counts instead of einmal.sends.
CREATE TABLE einmal.campaign_counts (
    campaign_id bigint NOT NULL REFERENCES einmal.campaigns (id),
    status      text NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (campaign_id, status)
);
ALTER TABLE einmal.campaigns ADD COLUMN pruned_at timestamptz;

-- Fresh planner statistics for campaign c's rows once a build added them (sends_analyze.sql): its partition
-- alone (or sends_legacy, for a campaign from before 0053). ANALYZE of the parent would sample every
-- partition, and hold SHARE UPDATE EXCLUSIVE on it, which a campaign's creation (its attach) waits for.
CREATE FUNCTION einmal.sends_analyze(c bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('einmal.sends_c' || c) IS NOT NULL THEN
        EXECUTE format('ANALYZE einmal.%I', 'sends_c' || c);
    ELSE
        ANALYZE einmal.sends_legacy;
    END IF;
END
$$;
