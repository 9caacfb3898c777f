-- Account :account_id's campaign mail over the :days days (UTC) from :since, a row per day, oldest first: the
-- messages delivered that day — of its ended campaigns :counted as einmal.campaign_days keeps them, of its :live
-- ones (sending, paused) from their send rows (their partitions only) — and the hard bounces and complaints
-- recorded that day (einmal.bounces, whatever day their message went out). Transactional messages are not counted.
WITH sent AS MATERIALIZED (  -- read once, not once a day
    SELECT day, sum(delivered) AS n FROM einmal.campaign_days
    WHERE campaign_id = ANY (:counted::bigint[]) AND day >= (:since::timestamptz AT TIME ZONE 'UTC')::date
    GROUP BY day
    UNION ALL
    SELECT (s.sent_at AT TIME ZONE 'UTC')::date, count(*) FROM einmal.sends s
    WHERE s.campaign_id = ANY (:live::bigint[]) AND s.status = 'sent' AND s.sent_at >= :since
    GROUP BY 1
), delivered AS (
    SELECT day, sum(n) AS n FROM sent GROUP BY day
), came AS (
    SELECT (b.created_at AT TIME ZONE 'UTC')::date AS day,
           count(*) FILTER (WHERE b.kind = 'hard') AS bounced,
           count(*) FILTER (WHERE b.kind = 'complaint') AS complained
    FROM einmal.bounces b
    WHERE b.account_id = :account_id AND b.created_at >= :since AND b.campaign_id < 4503599627370496
    GROUP BY 1
)
SELECT d::date AS day,
       coalesce(delivered.n, 0)::bigint AS delivered,
       coalesce(came.bounced, 0)::bigint AS bounced, coalesce(came.complained, 0)::bigint AS complained
FROM generate_series((:since::timestamptz AT TIME ZONE 'UTC')::date, (:since::timestamptz AT TIME ZONE 'UTC')::date
                     + (:days::integer - 1), interval '1 day') AS d
LEFT JOIN delivered ON delivered.day = d::date
LEFT JOIN came ON came.day = d::date
ORDER BY d
