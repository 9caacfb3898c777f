-- Up to :batch rows of campaign :campaign_id deleted from einmal.sends_legacy (rows written before 0053), one short
-- transaction a batch; returns how many went
WITH gone AS (
    DELETE FROM einmal.sends_legacy
    WHERE id IN (SELECT id FROM einmal.sends_legacy WHERE campaign_id = :campaign_id LIMIT :batch)
    RETURNING 1
)
SELECT count(*) FROM gone
