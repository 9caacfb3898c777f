-- Open ($3 true) or close list $2 of account $1's sign-up form; its allowed origins become $5 when $4, else
-- stay. A form opened for the first time gets token $6 (random, made by the caller); a token once made is
-- kept. No row: the account has no such list.
UPDATE einmal.lists
SET form_open = $3,
    form_origins = CASE WHEN $4 THEN $5::text[] ELSE form_origins END,
    form_token = CASE WHEN $3 THEN coalesce(form_token, $6) ELSE form_token END
WHERE account_id = $1 AND name = $2
RETURNING id, name, form_open, form_origins, form_token
