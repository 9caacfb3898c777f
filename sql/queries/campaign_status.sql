-- The campaign, its send rows counted per state, and the send rows that came back as a hard bounce,
-- a soft bounce, an unclassified bounce or a complaint (einmal.bounces), and per reason, in one snapshot.
-- No row when the campaign is unknown; one row with NULL send_status when it has no send rows.
SELECT c.id, c.name, c.status, c.pause_reason, s.send_status, coalesce(s.n, 0) AS n,
       b.bounced, b.soft_bounced, b.unclassified, b.complained, r.reasons
FROM einmal.campaigns AS c
LEFT JOIN LATERAL (
    SELECT status AS send_status, count(*) AS n
    FROM einmal.sends
    WHERE campaign_id = c.id
    GROUP BY status
) AS s ON true
CROSS JOIN LATERAL (
    SELECT count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'hard') AS bounced,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'soft') AS soft_bounced,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'unclassified') AS unclassified,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'complaint') AS complained
    FROM einmal.bounces AS bo
    JOIN einmal.sends AS se ON se.id = bo.send_id
    WHERE se.campaign_id = c.id
) AS b
CROSS JOIN LATERAL (  -- send rows per reason (service/inbound/reasons.py); rows written before 0030 have none
    SELECT coalesce(jsonb_object_agg(per.reason, per.n), '{}')::text AS reasons
    FROM (SELECT bo.reason, count(DISTINCT bo.send_id) AS n
          FROM einmal.bounces AS bo
          JOIN einmal.sends AS se ON se.id = bo.send_id
          WHERE se.campaign_id = c.id AND bo.reason IS NOT NULL
          GROUP BY bo.reason) AS per
) AS r
WHERE c.id = $1
