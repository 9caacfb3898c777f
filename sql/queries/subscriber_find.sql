-- The subscribers of the account named $1 whose mailbox key is $2 (service/addresses.py email_key,
-- never PostgreSQL's lower()), the spelling $3 first, with their lists and the key's suppression, if any.
SELECT s.id, s.account_id, s.email, s.email_lower, s.name, s.status, s.attributes, s.created_at,
       coalesce((SELECT string_agg(l.name, '|' ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id), '') AS lists,
       x.reason AS suppressed
FROM einmal.subscribers AS s JOIN einmal.accounts AS a ON a.id = s.account_id
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
WHERE a.name = $1 AND s.email_lower = $2::text AND s.status <> 'erased'
ORDER BY s.email = $3::text DESC, s.id
