-- The hosted sign-up form of list $1: the list's name and account, the account's display name, name and
-- language. No row: no such list.
SELECT l.id, l.account_id, l.name AS list_name, a.display_name, a.name AS account_name, a.language
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.id = $1
