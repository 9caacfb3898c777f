-- Open (:open true) or close list :list_name of account :account_id's sign-up form; its allowed origins become
-- :origins when :set_origins, else stay. A form opened for the first time gets token :token (random, made by the
-- caller); a token once made is kept. When :set_from, the list's own confirmations' From becomes :optin_from (NULL:
-- none, EINMAL_OPTIN_FROM), and its confirmation campaign, if made, sends from :campaign_from from then on (its
-- updated_at moves, so that a node compiles it anew). No row: the account has no such list.
WITH list AS (
    UPDATE einmal.lists
    SET form_open = :open,
        form_origins = CASE WHEN :set_origins THEN :origins::text[] ELSE form_origins END,
        form_token = CASE WHEN :open THEN coalesce(form_token, :token) ELSE form_token END,
        optin_from = CASE WHEN :set_from THEN :optin_from::text ELSE optin_from END
    WHERE account_id = :account_id AND name = :list_name
    RETURNING id, name, form_open, form_origins, form_token, optin_from
), confirmations AS (
    UPDATE einmal.campaigns AS c
    SET from_address = :campaign_from::text, updated_at = now()
    FROM list
    WHERE :set_from AND :campaign_from::text IS NOT NULL AND c.kind = 'confirmation' AND c.list_ids[1] = list.id
      AND c.account_id = :account_id AND c.from_address IS DISTINCT FROM :campaign_from::text
)
SELECT id, name, form_open, form_origins, form_token, optin_from FROM list
