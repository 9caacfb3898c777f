-- The campaigns of account :account_id, newest first, before id :before (cursor), in status :status unless NULL, at most :limit. A
-- draft given no time has none (NULL: it starts when approved), though the column holds its creation time. local_time:
-- 'HH:MM' in each recipient's time zone, NULL: at once.
SELECT c.id, c.name, c.subject, c.status,
       CASE WHEN c.status = 'draft' AND c.scheduled_for <= c.created_at THEN NULL ELSE c.scheduled_for END
           AS scheduled_for,
       c.pause_reason, c.created_at, c.unsubscribe_required AS unsubscribe,
       to_char(c.local_time, 'HH24:MI') AS local_time
FROM einmal.campaigns AS c
WHERE c.account_id = :account_id AND c.id < :before AND (:status::text IS NULL OR c.status = :status::text)
  AND c.kind = 'campaign'  -- not a list's confirmations
ORDER BY c.id DESC
LIMIT :limit
