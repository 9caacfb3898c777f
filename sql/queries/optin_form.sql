-- The open sign-up form of token $1: the list's id, name and account, its allowed origins, the account's
-- display name, name and language. No row: no such token, or its list's form is closed (the same answer).
SELECT l.id, l.account_id, l.name AS list_name, l.form_origins, a.display_name, a.name AS account_name, a.language
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.form_token = $1 AND l.form_open
