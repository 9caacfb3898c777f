-- The id of account :account_id's list named :list_name, whether its sign-ups are open (form_open: the form and
-- POST /api/v1/subscribe alike), its own confirmations' From (NULL: EINMAL_OPTIN_FROM), subject and text (NULL:
-- einmal's) and the account's language, or no row.
SELECT l.id, l.form_open, l.optin_from, l.optin_subject, l.optin_text, a.language
FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.account_id = :account_id AND l.name = :list_name
