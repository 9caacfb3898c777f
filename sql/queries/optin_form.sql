-- The open sign-up form of token :token: the list's id, title (NULL: none; its name is the operator's and never
-- shown) and account, its allowed origins, the account's display name and language, the list's own confirmations'
-- From (optin_from, NULL: EINMAL_OPTIN_FROM) and the From its confirmations go out from (from_address: the list's
-- own, else that of its confirmations made; NULL: neither), its own subject and text (NULL: einmal's). No row: no
-- such token, or its list's form is closed (the same answer).
SELECT l.id, l.account_id, l.title AS list_title, l.form_origins, a.display_name, a.language, l.optin_from,
       l.optin_subject, l.optin_text,
       coalesce(l.optin_from, (SELECT c.from_address FROM einmal.campaigns AS c
        WHERE c.kind = 'confirmation' AND c.list_ids[1] = l.id AND c.account_id = l.account_id)) AS from_address
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.form_token = :token AND l.form_open
