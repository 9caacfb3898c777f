-- Serialise the imports into account :account_id until the transaction ends: each sees the subscribers the other
-- added, so two at once never add two subscribers of one mailbox key.
SELECT pg_advisory_xact_lock(hashtextextended('einmal.import:' || :account_id::bigint, 0))
