-- Account :account_id's campaign mail over the last :days days (UTC), a row per day, oldest first: the messages
-- delivered that day (send rows sent then, of its campaigns that went out in the window: the others' partitions
-- are not read), and the hard bounces and complaints recorded that day (einmal.bounces, whatever day the
-- message went out). Transactional messages are not counted.
WITH since AS (
    SELECT ((now() AT TIME ZONE 'UTC')::date - (:days::integer - 1))::timestamp AT TIME ZONE 'UTC' AS at
), sent AS (
    SELECT (s.sent_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n
    FROM einmal.sends s, since
    WHERE s.campaign_id = ANY (ARRAY(
              SELECT c.id FROM einmal.campaigns c, since
              WHERE c.account_id = :account_id AND c.kind <> 'message'
                AND (c.status IN ('sending', 'paused') OR coalesce(c.sent_at, c.updated_at) >= since.at)))
      AND s.status = 'sent' AND s.sent_at >= since.at
    GROUP BY 1
), came AS (
    SELECT (b.created_at AT TIME ZONE 'UTC')::date AS day,
           count(*) FILTER (WHERE b.kind = 'hard') AS bounced,
           count(*) FILTER (WHERE b.kind = 'complaint') AS complained
    FROM einmal.bounces b, since
    WHERE b.account_id = :account_id AND b.created_at >= since.at AND b.campaign_id < 4503599627370496
    GROUP BY 1
)
SELECT d::date AS day, coalesce(sent.n, 0)::bigint AS delivered, coalesce(came.bounced, 0)::bigint AS bounced,
       coalesce(came.complained, 0)::bigint AS complained
FROM since, generate_series(since.at, now(), interval '1 day') AS d
LEFT JOIN sent ON sent.day = (d AT TIME ZONE 'UTC')::date
LEFT JOIN came ON came.day = (d AT TIME ZONE 'UTC')::date
ORDER BY d
