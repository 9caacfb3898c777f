-- Ended campaign :campaign_id's messages delivered a day (UTC) at a time, counted once from its send rows, with the
-- row of day '-infinity' that marks it counted. One pruned before it was ever counted has no rows left: its count
-- of sent (einmal.campaign_counts) goes to the day it finished. Two readers counting it at once: the second writes
-- nothing.
INSERT INTO einmal.campaign_days (campaign_id, day, delivered)
SELECT :campaign_id, (sent_at AT TIME ZONE 'UTC')::date, count(*)
FROM einmal.sends WHERE campaign_id = :campaign_id AND status = 'sent' AND sent_at IS NOT NULL
GROUP BY 2
UNION ALL
SELECT c.id, (coalesce(c.sent_at, c.updated_at) AT TIME ZONE 'UTC')::date, k.n
FROM einmal.campaigns c JOIN einmal.campaign_counts k ON k.campaign_id = c.id AND k.status = 'sent'
WHERE c.id = :campaign_id AND c.pruned_at IS NOT NULL
UNION ALL
SELECT :campaign_id, '-infinity', 0
ON CONFLICT DO NOTHING
