-- A batch of subscribers upserted (POST /api/v1/subscribers/batch) with set-based work only: the rules of
-- einmal.subscribers_upsert (migration 0113), which an older node still calls and which stays, at a lower cost
-- per row. The rows' subscribers are found first, by one scan of the mailbox keys' index, and updated by their
-- primary key: no join of the batch with the whole table (a hash of every subscriber, the plan 0113's got);
-- the attributes come as one JSON array (one value to encode, not a thousand); the answer reads each row's
-- named lists still awaiting confirmation in one pass, not a scan of every membership per row.
--
-- einmal.subscribers_lock keeps its promise (the import lock shared, then each key's own alone, in the order
-- of the locks' ids, each waiting at most `wait`) with one statement rather than a loop: the keys' ids are
-- sorted in a subquery, which is not flattened (it has DISTINCT and ORDER BY), so the locks are asked for in
-- that order.
CREATE OR REPLACE FUNCTION einmal.subscribers_lock(account bigint, mailboxes text[], wait text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lock_timeout', wait, true);
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('einmal.import:' || account, 0));
    PERFORM pg_advisory_xact_lock(k.lock_id)
    FROM (SELECT DISTINCT hashtextextended('einmal.subscriber:' || account || ':' || m, 0) AS lock_id
          FROM unnest(mailboxes) AS m ORDER BY 1) AS k;
END
$$;

-- As einmal.subscribers_upsert, with `new_attributes` one JSON array (element i: row i's attributes, an object,
-- or null when the row gives none).
CREATE FUNCTION einmal.subscribers_upsert_rows(account bigint, spelt text[], mailboxes text[], new_names text[],
                                               new_attributes jsonb, member_rows integer[], member_lists bigint[],
                                               wait text)
RETURNS TABLE (row_number integer, subscriber_id bigint, created boolean, status text, unconfirmed_lists text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found bigint[];
    done_rows integer[];
    done_ids bigint[];
    done_new boolean[];
BEGIN
    PERFORM einmal.subscribers_lock(account, mailboxes, wait);
    -- found[i]: row i's subscriber (its key's oldest not erased), or NULL; read with one scan of the index
    SELECT array_agg(e.id ORDER BY g.n) INTO found
    FROM unnest(mailboxes) WITH ORDINALITY AS g(mailbox, n)
    LEFT JOIN (SELECT DISTINCT ON (s.email_lower) s.email_lower, s.id FROM einmal.subscribers AS s
               WHERE s.account_id = account AND s.email_lower = ANY(mailboxes) AND s.status <> 'erased'
               ORDER BY s.email_lower, s.created_at, s.id) AS e ON e.email_lower = g.mailbox;
    WITH given AS MATERIALIZED (
        SELECT g.n::integer AS n, g.email, g.mailbox, g.name,
               CASE WHEN jsonb_typeof(g.attributes) = 'object' THEN g.attributes END AS attributes, g.id
        FROM ROWS FROM (unnest(spelt), unnest(mailboxes), unnest(new_names), jsonb_array_elements(new_attributes),
                        unnest(found))
             WITH ORDINALITY AS g(email, mailbox, name, attributes, id, n)
    ), updated AS (
        UPDATE einmal.subscribers AS s
        SET name = coalesce(g.name, s.name), attributes = s.attributes || coalesce(g.attributes, '{}')
        FROM given AS g
        WHERE s.id = ANY(found) AND s.id = g.id  -- the rows by their primary key, never a scan of the table
        RETURNING g.n, s.id, false AS is_new
    ), inserted AS (
        INSERT INTO einmal.subscribers AS s (account_id, email, email_lower, name, attributes)
        SELECT account, g.email, g.mailbox, coalesce(g.name, ''), coalesce(g.attributes, '{}')
        FROM given AS g WHERE g.id IS NULL
        ORDER BY g.n
        RETURNING s.email_lower, s.id
    ), done AS (
        SELECT n, id, is_new FROM updated
        UNION ALL SELECT g.n, i.id, true FROM inserted AS i JOIN given AS g ON g.mailbox = i.email_lower
    ), joined AS (
        INSERT INTO einmal.list_members (list_id, subscriber_id)
        SELECT l.id, d.id
        FROM unnest(member_rows, member_lists) AS m(n, list_id)
        JOIN done AS d ON d.n = m.n
        JOIN einmal.lists AS l ON l.id = m.list_id AND l.account_id = account
        ON CONFLICT (list_id, subscriber_id) DO NOTHING
    )
    SELECT array_agg(n), array_agg(id), array_agg(is_new) INTO done_rows, done_ids, done_new FROM done;
    -- the answer, by a statement of its own so that it sees the writes; a row's subscriber has its mailbox key
    RETURN QUERY
    SELECT d.n, d.id, d.is_new, einmal.subscriber_state(d.id, x.reason), coalesce(u.names, '{}')
    FROM unnest(done_rows, done_ids, done_new) AS d(n, id, is_new)
    LEFT JOIN einmal.suppressions AS x ON x.account_id = account AND x.email_lower = mailboxes[d.n]
    LEFT JOIN (
        SELECT m.n, array_agg(l.name ORDER BY l.name) AS names
        FROM unnest(member_rows, member_lists) AS m(n, list_id)
        JOIN unnest(done_rows, done_ids) AS w(n, id) ON w.n = m.n
        JOIN einmal.list_members AS lm ON lm.list_id = m.list_id AND lm.subscriber_id = w.id
        JOIN einmal.lists AS l ON l.id = m.list_id
        WHERE lm.state = 'unconfirmed'
        GROUP BY m.n
    ) AS u ON u.n = d.n
    ORDER BY d.n;
END
$$;
