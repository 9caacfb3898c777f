-- Open (:open true) or close list :list_name of account :account_id's sign-up form; its allowed origins become
-- :origins when :set_origins, else stay. A form opened for the first time gets token :token (random, made by the
-- caller); a token once made is kept. When :set_from, the list's own confirmations' From becomes :optin_from (NULL:
-- none, EINMAL_OPTIN_FROM), and its confirmation campaign, if made, sends from :campaign_from from then on; when
-- :set_subject or :set_text, its own subject or text becomes :optin_subject or :optin_text (NULL: none, einmal's),
-- and when :set_wording its confirmation campaign gets :campaign_subject, :campaign_text and their wording
-- :campaign_wording (the caller's, made with the campaign's language). A campaign changed has its updated_at
-- moved, so that a node compiles it anew. No row: the account has no such list.
WITH list AS (
    UPDATE einmal.lists
    SET form_open = :open,
        form_origins = CASE WHEN :set_origins THEN :origins::text[] ELSE form_origins END,
        form_token = CASE WHEN :open THEN coalesce(form_token, :token) ELSE form_token END,
        optin_from = CASE WHEN :set_from THEN :optin_from::text ELSE optin_from END,
        optin_subject = CASE WHEN :set_subject THEN :optin_subject::text ELSE optin_subject END,
        optin_text = CASE WHEN :set_text THEN :optin_text::text ELSE optin_text END
    WHERE account_id = :account_id AND name = :list_name
    RETURNING id, name, form_open, form_origins, form_token, optin_from, optin_subject, optin_text
), confirmations AS (  -- one UPDATE: a row is changed at most once in a statement
    UPDATE einmal.campaigns AS c
    SET from_address = CASE WHEN :set_from AND :campaign_from::text IS NOT NULL THEN :campaign_from::text
                            ELSE c.from_address END,
        subject = CASE WHEN :set_wording THEN :campaign_subject::text ELSE c.subject END,
        body_text = CASE WHEN :set_wording THEN :campaign_text::text ELSE c.body_text END,
        wording = CASE WHEN :set_wording THEN :campaign_wording::text ELSE c.wording END,
        updated_at = now()
    FROM list
    WHERE c.kind = 'confirmation' AND c.list_ids[1] = list.id AND c.account_id = :account_id
      AND ((:set_from AND :campaign_from::text IS NOT NULL AND c.from_address IS DISTINCT FROM :campaign_from::text)
           OR (:set_wording AND (c.subject, c.body_text, c.wording) IS DISTINCT FROM
                                (:campaign_subject::text, :campaign_text::text, :campaign_wording::text)))
)
SELECT list.*, a.language FROM list JOIN einmal.accounts AS a ON a.id = :account_id
