-- The state of campaign $1's partition einmal.sends_c<id>: none (its rows are in sends_legacy, or it is
-- dropped), attached, pending (a DETACH … CONCURRENTLY cut short: FINALIZE ends it) or detached
SELECT CASE WHEN t.oid IS NULL THEN 'none'
            WHEN i.inhrelid IS NULL THEN 'detached'
            WHEN i.inhdetachpending THEN 'pending'
            ELSE 'attached' END AS state
FROM (SELECT to_regclass('einmal.sends_c' || $1::bigint) AS oid) AS t
LEFT JOIN pg_inherits AS i ON i.inhrelid = t.oid
