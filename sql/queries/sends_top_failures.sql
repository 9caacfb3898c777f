-- The most frequent replies of campaign :campaign_id's failed rows, at most :top of them, most frequent first; not the rows
-- a cancel settled (`campaign status` counts them as cancelled).
SELECT coalesce(last_reply, '') AS reply, count(*) AS n
FROM einmal.sends
WHERE campaign_id = :campaign_id AND status = 'failed' AND last_reply IS DISTINCT FROM 'campaign cancelled'
GROUP BY 1
ORDER BY n DESC, reply
LIMIT :top
