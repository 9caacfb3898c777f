-- Where campaign :campaign_id's rows live: `legacy` when in einmal.sends_legacy (a campaign from before 0053), else the
-- state of its partition einmal.sends_c<id>: none (dropped), attached, pending (a DETACH … CONCURRENTLY cut
-- short: FINALIZE ends it) or detached
SELECT CASE WHEN :campaign_id::bigint < (SELECT legacy_below FROM einmal.sends_layout) THEN 'legacy'
            WHEN t.oid IS NULL THEN 'none'
            WHEN i.inhrelid IS NULL THEN 'detached'
            WHEN i.inhdetachpending THEN 'pending'
            ELSE 'attached' END AS state
FROM (SELECT to_regclass('einmal.sends_c' || :campaign_id::bigint) AS oid) AS t
LEFT JOIN pg_inherits AS i ON i.inhrelid = t.oid
