-- Before list :list_id's confirmation campaign is made (optin_campaign_ensure), until the transaction ends: one
-- sign-up makes it while the others wait here holding nothing, rather than on the unique index while its
-- partition is attached (which waits for them: a deadlock).
SELECT pg_advisory_xact_lock(hashtextextended('einmal.confirmations:' || :list_id::bigint, 0))
