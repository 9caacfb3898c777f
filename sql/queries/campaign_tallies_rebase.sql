-- At a resume of campaign :campaign_id: its figures start again from nothing (service/campaigns/self_pause.py). The row 'resumed'
-- holds the sums of the others, negated, and the time.
INSERT INTO einmal.campaign_tallies AS k (campaign_id, source, delivered, refused, rejected, bounced, complained,
                                         since)
SELECT :campaign_id, 'resumed', -coalesce(sum(delivered), 0), -coalesce(sum(refused), 0), -coalesce(sum(rejected), 0),
       -coalesce(sum(bounced), 0), -coalesce(sum(complained), 0), now()
FROM einmal.campaign_tallies WHERE campaign_id = :campaign_id AND source <> 'resumed'
ON CONFLICT (campaign_id, source) DO UPDATE SET delivered = EXCLUDED.delivered, refused = EXCLUDED.refused,
    rejected = EXCLUDED.rejected, bounced = EXCLUDED.bounced, complained = EXCLUDED.complained,
    since = EXCLUDED.since
