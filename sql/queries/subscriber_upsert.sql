-- Account $1's subscriber of mailbox key $3 upserted, in one statement: under the locks of
-- subscriber_lock, its name set to $4 unless NULL and the attributes $5 merged into its own; or, when
-- the key has none, a new one spelt $2. Waits at most $6 for the locks (einmal.subscriber_upsert,
-- migration 0102). Its id, and whether it is new.
SELECT subscriber_id AS id, is_new AS created
FROM einmal.subscriber_upsert($1, $2::text, $3::text, $4::text, $5::jsonb, $6::text)
