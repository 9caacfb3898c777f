-- Account :account_id's message to :email (mailbox key :email_key) made in one statement (einmal.message_make,
-- migration 0158): under the campaign id :campaign_id (NULL: the next of einmal.message_ids), keyed by
-- :idempotency_key (NULL: none); its subscriber upserted, waiting at most :lock_wait for an import's lock. Its id,
-- and whether it was made now (false: the key's message made before).
SELECT message_id, created
FROM einmal.message_make(:account_id::bigint, :campaign_id::bigint, :idempotency_key::text, :template::text,
    :data::jsonb, :honour_unsubscribe::boolean, :email::text, :email_key::text, :campaign_name::text, :subject::text,
    :from_address::text, :body_text::text, :body_html::text, :lock_wait::text)
