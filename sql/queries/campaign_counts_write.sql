-- What campaign :campaign_id's send rows came to, kept for when they are pruned: one read of its rows (a cancelled
-- campaign, one finished with rows in doubt, or one finished before 0054); returns the rows counted.
WITH counted AS (
    INSERT INTO einmal.campaign_counts (campaign_id, status, n)
    SELECT campaign_id, status, count(*) FROM einmal.sends WHERE campaign_id = :campaign_id
    GROUP BY campaign_id, status
    ON CONFLICT (campaign_id, status) DO UPDATE SET n = EXCLUDED.n
    RETURNING n
)
SELECT coalesce(sum(n), 0)::bigint FROM counted
