-- Open (:open true) or close list :list_name of account :account_id's sign-up form; its allowed origins become
-- :origins when :set_origins, else stay. A form opened for the first time gets token :token (random, made by the
-- caller); a token once made is kept. No row: the account has no such list.
UPDATE einmal.lists
SET form_open = :open,
    form_origins = CASE WHEN :set_origins THEN :origins::text[] ELSE form_origins END,
    form_token = CASE WHEN :open THEN coalesce(form_token, :token) ELSE form_token END
WHERE account_id = :account_id AND name = :list_name
RETURNING id, name, form_open, form_origins, form_token
