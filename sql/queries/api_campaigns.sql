-- The campaigns of account $1, newest first, before id $2 (cursor), in status $3 unless NULL, at most $4. A
-- draft given no time has none (NULL: it starts when approved), though the column holds its creation time.
SELECT c.id, c.name, c.subject, c.status,
       CASE WHEN c.status = 'draft' AND c.scheduled_for <= c.created_at THEN NULL ELSE c.scheduled_for END
           AS scheduled_for,
       c.pause_reason, c.created_at, c.unsubscribe_required AS unsubscribe
FROM einmal.campaigns AS c
WHERE c.account_id = $1 AND c.id < $2 AND ($3::text IS NULL OR c.status = $3::text)
  AND c.kind = 'campaign'  -- not a list's confirmations
ORDER BY c.id DESC
LIMIT $4
