-- The sign-up form of list $2 of account $1: open or not, allowed origins, token (NULL: never opened).
-- No row: no such list.
SELECT id, name, form_open, form_origins, form_token FROM einmal.lists WHERE account_id = $1 AND name = $2
