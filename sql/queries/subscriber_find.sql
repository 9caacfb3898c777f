-- The subscribers of the account :account_id whose mailbox key is :key (service/addresses.py email_key,
-- never PostgreSQL's lower()), the spelling :spelling first, each with its state (einmal.subscriber_state), its
-- lists (confirmed memberships), its sign-ups awaiting confirmation and the key's suppression, if any.
SELECT s.id, s.account_id, s.email, s.email_lower, s.name, einmal.subscriber_state(s.id, x.reason) AS status,
       s.attributes, s.created_at,
       coalesce((SELECT string_agg(l.name, '|' ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'confirmed'), '') AS lists,
       coalesce((SELECT string_agg(l.name, '|' ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'unconfirmed'), '') AS unconfirmed,
       x.reason AS suppressed
FROM einmal.subscribers AS s
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
WHERE s.account_id = :account_id AND s.email_lower = :key::text AND s.status <> 'erased'
ORDER BY s.email = :spelling::text DESC, s.id
