-- Put the subscriber of each staged mailbox key on its list (new or existing subscriber alike).
INSERT INTO einmal.list_members (list_id, subscriber_id)
SELECT l.id, s.id
FROM pg_temp.einmal_import AS i
JOIN einmal.lists AS l ON l.account_id = :account_id::bigint AND l.name = i.list_name
JOIN einmal.subscribers AS s ON s.account_id = :account_id::bigint AND s.email_lower = i.email_key
    AND s.status <> 'erased'
ON CONFLICT (list_id, subscriber_id) DO NOTHING
