-- The most frequent replies of campaign $1's failed rows, at most $2 of them, most frequent first.
SELECT coalesce(last_reply, '') AS reply, count(*) AS n
FROM einmal.sends
WHERE campaign_id = $1 AND status = 'failed'
GROUP BY 1
ORDER BY n DESC, reply
LIMIT $2
