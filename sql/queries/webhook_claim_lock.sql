-- The first statement of a claim's transaction: claims take turns across the cluster, so that each counts
-- the leases of every claim before it (webhook_claim.sql). A claim is a few milliseconds; a node that
-- stalls inside one loses its session after 5 s idle, and the lock with it.
SELECT set_config('idle_in_transaction_session_timeout', '5s', true),
       pg_advisory_xact_lock(hashtextextended('einmal.webhook_claim', 0))
