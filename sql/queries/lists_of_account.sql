-- The lists of account :account_id by name, with their member counts: confirmed (the members campaigns reach) and
-- unconfirmed (sign-ups awaiting confirmation, double opt-in), their title (NULL: none) and their sign-up
-- form's token when it is open.
SELECT l.id, l.name, l.title, l.created_at,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'confirmed') AS members,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'unconfirmed') AS unconfirmed,
       CASE WHEN l.form_open THEN l.form_token END AS form_token
FROM einmal.lists AS l
WHERE l.account_id = :account_id
ORDER BY l.name
