-- Before account $1's subscriber of mailbox key $2 is upserted (api_subscriber_upsert), until the
-- transaction ends, waiting at most $3: the account's import lock shared (no import runs meanwhile, as it
-- takes that lock alone: subscribers_import_lock) and the key's own alone (two upserts of one key take
-- turns; upserts of other keys run side by side).
SELECT set_config('lock_timeout', $3::text, true),
       pg_advisory_xact_lock_shared(hashtextextended('einmal.import:' || $1::bigint, 0)),
       pg_advisory_xact_lock(hashtextextended('einmal.subscriber:' || $1::bigint || ':' || $2::text, 0))
