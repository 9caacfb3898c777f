-- At a resume of campaign $1: its figures start again from nothing (service/health.py). The row 'resumed'
-- holds the sums of the others, negated, and the time.
INSERT INTO einmal.campaign_tallies AS k (campaign_id, source, delivered, refused, rejected, bounced, complained,
                                         since)
SELECT $1, 'resumed', -coalesce(sum(delivered), 0), -coalesce(sum(refused), 0), -coalesce(sum(rejected), 0),
       -coalesce(sum(bounced), 0), -coalesce(sum(complained), 0), now()
FROM einmal.campaign_tallies WHERE campaign_id = $1 AND source <> 'resumed'
ON CONFLICT (campaign_id, source) DO UPDATE SET delivered = EXCLUDED.delivered, refused = EXCLUDED.refused,
    rejected = EXCLUDED.rejected, bounced = EXCLUDED.bounced, complained = EXCLUDED.complained,
    since = EXCLUDED.since
