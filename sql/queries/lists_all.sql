-- Every list, or account :account_name's (NULL: all), by account and name: id, account name, list name, confirmed and
-- unconfirmed members, whether its sign-up form is open and its token.
SELECT l.id, a.name AS account, l.name,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'confirmed') AS members,
       (SELECT count(*) FROM einmal.list_members m WHERE m.list_id = l.id AND m.state = 'unconfirmed') AS unconfirmed,
       l.form_open, l.form_token
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE :account_name::text IS NULL OR a.name = :account_name::text
ORDER BY a.name, l.name
