-- The first :size mailboxes by address of those segment_count.sql counts, each as the recipient build would take
-- it (the oldest matching confirmed subscriber of the mailbox), and whether it is suppressed.
SELECT DISTINCT ON (s.email_lower)
       s.email, s.name, s.attributes, s.created_at,
       EXISTS (SELECT 1 FROM einmal.suppressions AS x
               WHERE x.account_id = :account_id AND x.email_lower = s.email_lower) AS suppressed
FROM einmal.subscribers AS s
WHERE s.account_id = :account_id AND s.status = 'confirmed'
  AND EXISTS (SELECT 1 FROM einmal.list_members AS lm JOIN einmal.lists AS ll ON ll.id = lm.list_id
              WHERE lm.subscriber_id = s.id AND lm.state = 'confirmed' AND ll.account_id = :account_id)
  AND /* segment */ true
ORDER BY s.email_lower, s.created_at, s.id
LIMIT :size
