-- The mailboxes of account :account_id that a campaign to the segment would take (the segment's predicate takes
-- the place of the marker below, service/segments/compiled.py): those of its confirmed subscribers that match,
-- each through a confirmed membership of one of the account's lists, counted once per mailbox as the recipient
-- build does (recipients_build_chunk.sql); and how many of them are suppressed (their rows would be 'suppressed').
WITH matched AS (
    SELECT DISTINCT s.email_lower
    FROM einmal.subscribers AS s
    WHERE s.account_id = :account_id AND s.status = 'confirmed'
      AND EXISTS (SELECT 1 FROM einmal.list_members AS lm JOIN einmal.lists AS ll ON ll.id = lm.list_id
                  WHERE lm.subscriber_id = s.id AND lm.state = 'confirmed' AND ll.account_id = :account_id)
      AND /* segment */ true
)
SELECT count(*) AS subscribers,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM einmal.suppressions AS x
                                      WHERE x.account_id = :account_id AND x.email_lower = matched.email_lower))
           AS suppressed
FROM matched
