-- A batch of subscribers upserted through the HTTP API (POST /api/v1/subscribers/batch,
-- service/subscribers/batch.py) in one statement, one round trip, whatever the batch's size: the rows are passed
-- as arrays and unnested. The rules are the single upsert's (einmal.subscriber_upsert, migration 0102).
--
-- einmal.subscribers_lock(account, mailbox keys, wait): the account's import lock shared, then each key's own
-- alone (the same locks as einmal.subscriber_lock), taken in the order of the locks' ids, so that two batches
-- naming keys in another order take them in one order and never wait on each other in a circle; waiting at
-- most `wait` for each (a lock_timeout). Held until the transaction ends.
CREATE FUNCTION einmal.subscribers_lock(account bigint, mailboxes text[], wait text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    lock_id bigint;
BEGIN
    PERFORM set_config('lock_timeout', wait, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('einmal.import:' || account, 0));
    FOR lock_id IN
        SELECT DISTINCT hashtextextended('einmal.subscriber:' || account || ':' || m, 0) FROM unnest(mailboxes) AS m
        ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(lock_id);
    END LOOP;
END
$$;

-- Account `account`'s subscribers of the mailbox keys `mailboxes` (distinct: the caller merged the rows of one
-- key), each under the locks of subscribers_lock: for a key with a subscriber (its oldest, not erased), its name
-- set to the row's name unless NULL and the row's attributes merged into its own; for one without, a new
-- subscriber spelt as the row's `spelt` (status confirmed: like an import, the caller asserts consent). Then the
-- memberships (`member_rows[i]` is the row, 1-based, to put on the list `member_lists[i]`, which must be the
-- account's) inserted confirmed, ON CONFLICT DO NOTHING: a sign-up awaiting confirmation stays unconfirmed,
-- since only its own link confirms it. Per row: its ordinal, its subscriber, whether it is new, its state
-- (einmal.subscriber_state) and the lists it named whose membership still awaits confirmation. The answer is
-- read by a statement of its own, after the writes, so that it sees them.
CREATE FUNCTION einmal.subscribers_upsert(account bigint, spelt text[], mailboxes text[], new_names text[],
                                          new_attributes jsonb[], member_rows integer[], member_lists bigint[],
                                          wait text)
RETURNS TABLE (row_number integer, subscriber_id bigint, created boolean, status text, unconfirmed_lists text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    done_rows integer[];
    done_ids bigint[];
    done_new boolean[];
BEGIN
    PERFORM einmal.subscribers_lock(account, mailboxes, wait);
    WITH given AS (
        SELECT g.email, g.mailbox, g.name, g.attributes, g.n::integer AS n
        FROM unnest(spelt, mailboxes, new_names, new_attributes) WITH ORDINALITY AS g(email, mailbox, name, attributes, n)
    ), existing AS (
        SELECT DISTINCT ON (s.email_lower) g.n, s.id
        FROM given AS g JOIN einmal.subscribers AS s
            ON s.account_id = account AND s.email_lower = g.mailbox AND s.status <> 'erased'
        ORDER BY s.email_lower, s.created_at, s.id
    ), updated AS (
        UPDATE einmal.subscribers AS s
        SET name = coalesce(g.name, s.name), attributes = s.attributes || coalesce(g.attributes, '{}')
        FROM existing AS e JOIN given AS g ON g.n = e.n
        WHERE s.id = e.id
        RETURNING e.n, s.id, false AS is_new
    ), inserted AS (
        INSERT INTO einmal.subscribers AS s (account_id, email, email_lower, name, attributes)
        SELECT account, g.email, g.mailbox, coalesce(g.name, ''), coalesce(g.attributes, '{}')
        FROM given AS g WHERE NOT EXISTS (SELECT 1 FROM existing AS e WHERE e.n = g.n)
        ORDER BY g.n
        RETURNING s.email, s.id
    ), done AS (
        SELECT n, id, is_new FROM updated
        UNION ALL SELECT g.n, i.id, true FROM inserted AS i JOIN given AS g ON g.email = i.email
    ), joined AS (
        INSERT INTO einmal.list_members (list_id, subscriber_id)
        SELECT l.id, d.id
        FROM unnest(member_rows, member_lists) AS m(n, list_id)
        JOIN done AS d ON d.n = m.n
        JOIN einmal.lists AS l ON l.id = m.list_id AND l.account_id = account
        ON CONFLICT (list_id, subscriber_id) DO NOTHING
    )
    SELECT array_agg(n), array_agg(id), array_agg(is_new) INTO done_rows, done_ids, done_new FROM done;
    RETURN QUERY
    SELECT d.n, d.id, d.is_new, einmal.subscriber_state(d.id, x.reason),
           coalesce((SELECT array_agg(l.name ORDER BY l.name)
                     FROM unnest(member_rows, member_lists) AS m(n, list_id)
                     JOIN einmal.list_members AS lm ON lm.list_id = m.list_id AND lm.subscriber_id = d.id
                     JOIN einmal.lists AS l ON l.id = m.list_id
                     WHERE m.n = d.n AND lm.state = 'unconfirmed'), '{}')
    FROM unnest(done_rows, done_ids, done_new) AS d(n, id, is_new)
    JOIN einmal.subscribers AS s ON s.id = d.id
    LEFT JOIN einmal.suppressions AS x ON x.account_id = account AND x.email_lower = s.email_lower
    ORDER BY d.n;
END
$$;
