-- The lists of account $1 by name, with their member counts.
SELECT l.id, l.name, l.created_at, (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id) AS members
FROM einmal.lists AS l
WHERE l.account_id = $1
ORDER BY l.name
