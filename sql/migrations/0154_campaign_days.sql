-- Messages a finished campaign delivered, a day (UTC) at a time (service/accounts/deliverability.py): counted
-- once from its send rows the first time an account's deliverability is read after the campaign ended (sent or
-- cancelled: its rows no longer go out), so that 30 days of figures read a few rows a campaign rather than
-- every send row again. The row of day '-infinity' marks a campaign counted (it may have delivered nothing).
-- Kept when the campaign's send rows are pruned: the figures outlive them.
CREATE TABLE einmal.campaign_days (
    campaign_id bigint NOT NULL REFERENCES einmal.campaigns (id) ON DELETE CASCADE,
    day         date NOT NULL,
    delivered   bigint NOT NULL,
    PRIMARY KEY (campaign_id, day)
);
