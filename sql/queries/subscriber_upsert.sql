-- Account :account_id's subscriber of mailbox key :email_key upserted, in one statement: under the locks of
-- subscriber_lock, its name set to :name unless NULL and the attributes :attributes merged into its own; or, when
-- the key has none, a new one spelt :email. Waits at most :lock_wait for the locks (einmal.subscriber_upsert,
-- migration 0102). Its id, and whether it is new.
SELECT subscriber_id AS id, is_new AS created
FROM einmal.subscriber_upsert(:account_id, :email::text, :email_key::text, :name::text, :attributes::jsonb,
    :lock_wait::text)
