-- A subscriber's upsert through the HTTP API in one statement, one round trip (api_subscriber_upsert.sql):
-- the locks of api_subscriber_lock, then the upsert. Each statement of a PL/pgSQL function reads with a
-- snapshot of its own, so the upsert, taken after the locks, sees what an upsert of the same key that held
-- them before committed. The locks end with the statement's transaction.
--
-- einmal.subscriber_lock(account, mailbox key, wait): the account's import lock shared (no import runs
-- meanwhile, as it takes that lock alone: subscribers_import_lock) and the key's own alone (two upserts of
-- one key take turns; upserts of other keys run side by side), waiting at most `wait` (a lock_timeout).
CREATE FUNCTION einmal.subscriber_lock(account bigint, mailbox text, wait text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lock_timeout', wait, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('einmal.import:' || account, 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('einmal.subscriber:' || account || ':' || mailbox, 0));
END
$$;

-- Account `account`'s subscriber of mailbox key `mailbox` (its oldest, not erased): its name set to
-- `new_name` unless NULL, `new_attributes` merged into its own; or, when it has none, a new one spelt
-- `spelt` (status confirmed: like an import, the caller asserts consent). Its id, and whether it is new.
CREATE FUNCTION einmal.subscriber_upsert(account bigint, spelt text, mailbox text, new_name text,
                                         new_attributes jsonb, wait text)
RETURNS TABLE (subscriber_id bigint, is_new boolean)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM einmal.subscriber_lock(account, mailbox, wait);
    RETURN QUERY
    WITH existing AS (
        SELECT s.id FROM einmal.subscribers AS s
        WHERE s.account_id = account AND s.email_lower = mailbox AND s.status <> 'erased'
        ORDER BY s.created_at, s.id LIMIT 1
        FOR UPDATE
    ), updated AS (
        UPDATE einmal.subscribers AS s
        SET name = coalesce(new_name, s.name), attributes = s.attributes || coalesce(new_attributes, '{}')
        FROM existing AS e WHERE s.id = e.id
        RETURNING s.id, false
    ), inserted AS (
        INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes)
        SELECT account, spelt, mailbox, coalesce(new_name, ''), coalesce(new_attributes, '{}')
        WHERE NOT EXISTS (SELECT 1 FROM existing)
        RETURNING einmal.subscribers.id, true
    )
    SELECT * FROM updated UNION ALL SELECT * FROM inserted;
END
$$;
