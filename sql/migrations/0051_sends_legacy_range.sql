-- Retention, step 2 of 4: the bound below which every campaign's rows stay in today's table, which 0053
-- attaches as the partition einmal.sends_legacy. Every campaign from legacy_below on gets a partition of its
-- own. The CHECK is NOT VALID: taking the table's lock for an instant, it checks only new rows (0052
-- validates the rest without blocking writes). A campaign an older node creates between this step and 0053
-- has an id of at least legacy_below: its rows wait for a node of this version (docs/design.md#retention).
SET LOCAL lock_timeout = '10s';
CREATE TABLE einmal.sends_layout (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    legacy_below bigint NOT NULL
);
INSERT INTO einmal.sends_layout (legacy_below)
SELECT greatest((SELECT coalesce(max(id), 0) FROM einmal.campaigns),
                (SELECT coalesce(max(campaign_id), 0) FROM einmal.sends)) + 1;
DO $$
BEGIN
    EXECUTE format('ALTER TABLE einmal.sends ADD CONSTRAINT sends_legacy_range CHECK (campaign_id < %s) NOT VALID',
                   (SELECT legacy_below FROM einmal.sends_layout));
END $$;
