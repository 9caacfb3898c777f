-- the whole recipient list of campaign $1 in one statement: the same rows einmal's builder
-- writes (the oldest confirmed subscriber of each address, suppressed ones as 'suppressed'),
-- without chunks
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)
SELECT DISTINCT ON (s.email_lower)
       c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id,
       CASE WHEN EXISTS (SELECT 1 FROM einmal.suppressions x
                         WHERE x.account_id = c.account_id AND x.email_lower = s.email_lower)
            THEN 'suppressed' ELSE 'queued' END
FROM einmal.campaigns c JOIN einmal.subscribers s ON s.account_id = c.account_id
WHERE c.id = $1 AND s.status = 'confirmed'
  AND EXISTS (SELECT 1 FROM einmal.list_members m WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
ORDER BY s.email_lower, s.created_at, s.id
ON CONFLICT DO NOTHING
