-- The sign-up form of list :list_name of account :account_id: open or not, allowed origins, token (NULL: never
-- opened), its own confirmations' From (NULL: EINMAL_OPTIN_FROM), subject and text (NULL: einmal's in the account's
-- language, the account's language). No row: no such list.
SELECT l.id, l.name, l.form_open, l.form_origins, l.form_token, l.optin_from, l.optin_subject, l.optin_text,
       a.language
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.account_id = :account_id AND l.name = :list_name
