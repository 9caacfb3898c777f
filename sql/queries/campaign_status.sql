-- The campaign and its send rows counted per state, in one snapshot.
-- No row when the campaign is unknown; one row with NULL send_status when it has no send rows.
SELECT c.id, c.name, c.status, c.pause_reason, s.send_status, coalesce(s.n, 0) AS n
FROM einmal.campaigns AS c
LEFT JOIN LATERAL (
    SELECT status AS send_status, count(*) AS n
    FROM einmal.sends
    WHERE campaign_id = c.id
    GROUP BY status
) AS s ON true
WHERE c.id = $1
