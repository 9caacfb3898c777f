-- Sequence :sequence_id of account :account_id with its list's name; no row: not the account's
SELECT q.id, q.name, q.status, q.created_at, q.segment, q.list_id, l.name AS list
FROM einmal.sequences AS q JOIN einmal.lists AS l ON l.id = q.list_id
WHERE q.id = :sequence_id AND q.account_id = :account_id
