-- Serialise the imports into account $1 until the transaction ends: each sees the subscribers the other
-- added, so two at once never add two subscribers of one mailbox key.
SELECT pg_advisory_xact_lock(hashtextextended('einmal.import:' || $1::bigint, 0))
