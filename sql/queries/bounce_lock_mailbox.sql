-- Serialise the soft bounces of one mailbox ($1 account, $2 email_lower) until the transaction ends,
-- so two arriving at once are counted one after the other and the limit is never stepped over.
SELECT pg_advisory_xact_lock(hashtextextended('einmal.bounces:' || $1::bigint || ':' || $2::text, 0))
