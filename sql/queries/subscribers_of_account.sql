-- The subscribers of account $1 (not the erased), by id after $3, at most $5: those whose mailbox key is $2
-- when it is not NULL, in state $4 (einmal.subscriber_state) when it is not NULL, a confirmed member of the list named $6 when it is
-- not NULL. Each with its lists (confirmed memberships: the ones campaigns reach), its sign-ups awaiting
-- confirmation (unconfirmed ones, double opt-in) and its key's suppression.
SELECT s.id, s.email, s.name, einmal.subscriber_state(s.id, x.reason) AS status, s.attributes, s.created_at,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'confirmed'), '{}') AS lists,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'unconfirmed'), '{}') AS unconfirmed_lists,
       x.reason AS suppressed
FROM einmal.subscribers AS s
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
WHERE s.account_id = $1 AND s.status <> 'erased' AND s.id > $3
  AND ($2::text IS NULL OR s.email_lower = $2::text) AND ($4::text IS NULL OR einmal.subscriber_state(s.id, x.reason) = $4::text)
  AND ($6::text IS NULL OR EXISTS (SELECT 1 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                                   WHERE m.subscriber_id = s.id AND l.name = $6::text AND m.state = 'confirmed'))
ORDER BY s.id
LIMIT $5
