-- The lists of account $1 by name, with their member counts: confirmed (the members campaigns reach) and
-- unconfirmed (sign-ups awaiting confirmation, double opt-in).
SELECT l.id, l.name, l.created_at,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'confirmed') AS members,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'unconfirmed') AS unconfirmed
FROM einmal.lists AS l
WHERE l.account_id = $1
ORDER BY l.name
