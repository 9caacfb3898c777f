-- Put the subscriber of each staged mailbox key on its list (new or existing subscriber alike). Returns, per list
-- the chunk names, how many members it gained (added) and how many mailboxes the chunk put on it (named).
WITH added AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id)
    SELECT l.id, s.id
    FROM pg_temp.einmal_import AS i
    JOIN einmal.lists AS l ON l.account_id = :account_id::bigint AND l.name = i.list_name
    JOIN einmal.subscribers AS s ON s.account_id = :account_id::bigint AND s.email_lower = i.email_key
        AND s.status <> 'erased'
    ON CONFLICT (list_id, subscriber_id) DO NOTHING
    RETURNING list_id
), named AS (
    SELECT list_name, count(DISTINCT email_key) AS named FROM pg_temp.einmal_import
    WHERE list_name IS NOT NULL GROUP BY list_name
)
SELECT n.list_name AS name, n.named,
       (SELECT count(*) FROM added AS a JOIN einmal.lists AS l ON l.id = a.list_id
        WHERE l.account_id = :account_id::bigint AND l.name = n.list_name) AS added
FROM named AS n
