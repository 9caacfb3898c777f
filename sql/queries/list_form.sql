-- The sign-up form of list :list_name of account :account_id: open or not, allowed origins, token (NULL: never
-- opened), its own confirmations' From (NULL: EINMAL_OPTIN_FROM). No row: no such list.
SELECT id, name, form_open, form_origins, form_token, optin_from FROM einmal.lists
    WHERE account_id = :account_id AND name = :list_name
