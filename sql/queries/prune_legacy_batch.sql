-- Up to $2 rows of campaign $1 deleted from einmal.sends_legacy (rows written before 0053), one short
-- transaction a batch; returns how many went
WITH gone AS (
    DELETE FROM einmal.sends_legacy
    WHERE id IN (SELECT id FROM einmal.sends_legacy WHERE campaign_id = $1 LIMIT $2)
    RETURNING 1
)
SELECT count(*) FROM gone
