-- Put the subscriber of each staged mailbox key on its list (new or existing subscriber alike), in the row's state
-- ('confirmed', or 'unconfirmed': a sign-up awaiting confirmation, which no campaign goes to) with the source's time
-- of confirmation and where it came from. An existing membership stays as it is: an import never confirms a
-- sign-up awaiting confirmation. A mailbox that left the list (einmal.list_departures, migration 0132) is not put
-- back on it. A row of state 'left' joins nothing and keeps its departure (the first one's time stays). Returns,
-- per list the chunk names, how many members it gained (added, of them pending: awaiting confirmation), how many
-- mailboxes the chunk put on it (named), how many of those had left it and were not put back (barred), how many it
-- says left the list (gone), and how many of those are on it here all the same (still).
WITH departed AS (
    INSERT INTO einmal.list_departures (list_id, email_lower)
    SELECT DISTINCT l.id, i.email_key
    FROM pg_temp.einmal_import AS i
    JOIN einmal.lists AS l ON l.account_id = :account_id::bigint AND l.name = i.list_name
    WHERE i.state = 'left'
    ON CONFLICT (list_id, email_lower) DO NOTHING
), joining AS (
    SELECT l.id AS list_id, l.name AS list_name, s.id AS subscriber_id, i.email_key, i.state, i.confirmed_at, i.source,
           EXISTS (SELECT 1 FROM einmal.list_departures AS d WHERE d.list_id = l.id AND d.email_lower = i.email_key)
               AND NOT EXISTS (SELECT 1 FROM einmal.list_members AS m WHERE m.list_id = l.id AND m.subscriber_id = s.id)
               AS barred
    FROM pg_temp.einmal_import AS i
    JOIN einmal.lists AS l ON l.account_id = :account_id::bigint AND l.name = i.list_name
    JOIN einmal.subscribers AS s ON s.account_id = :account_id::bigint AND s.email_lower = i.email_key
        AND s.status <> 'erased'
    WHERE i.state <> 'left'
), added AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id, state, confirmed_at, source)
    SELECT list_id, subscriber_id, state, confirmed_at, source FROM joining WHERE NOT barred
    ON CONFLICT (list_id, subscriber_id) DO NOTHING
    RETURNING list_id, state
), named AS (
    SELECT list_name, count(DISTINCT email_key) FILTER (WHERE state <> 'left') AS named,
           count(DISTINCT email_key) FILTER (WHERE state = 'left') AS gone
    FROM pg_temp.einmal_import
    WHERE list_name IS NOT NULL GROUP BY list_name
)
SELECT n.list_name AS name, n.named, n.gone,
       (SELECT count(*) FROM added AS a JOIN einmal.lists AS l ON l.id = a.list_id
        WHERE l.account_id = :account_id::bigint AND l.name = n.list_name) AS added,
       (SELECT count(*) FROM added AS a JOIN einmal.lists AS l ON l.id = a.list_id
        WHERE l.account_id = :account_id::bigint AND l.name = n.list_name AND a.state = 'unconfirmed') AS pending,
       (SELECT count(DISTINCT j.email_key) FROM joining AS j WHERE j.list_name = n.list_name AND j.barred) AS barred,
       (SELECT count(DISTINCT i.email_key) FROM pg_temp.einmal_import AS i
        JOIN einmal.lists AS l ON l.account_id = :account_id::bigint AND l.name = i.list_name
        JOIN einmal.subscribers AS s ON s.account_id = :account_id::bigint AND s.email_lower = i.email_key
        JOIN einmal.list_members AS m ON m.list_id = l.id AND m.subscriber_id = s.id
        WHERE i.state = 'left' AND i.list_name = n.list_name) AS still
FROM named AS n
