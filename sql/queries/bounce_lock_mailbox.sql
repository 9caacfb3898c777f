-- Serialise the soft bounces of one mailbox (:account_id account, :email_key email_lower) until the transaction ends,
-- so two arriving at once are counted one after the other and the limit is never stepped over.
SELECT pg_advisory_xact_lock(hashtextextended('einmal.bounces:' || :account_id::bigint || ':' || :email_key::text, 0))
