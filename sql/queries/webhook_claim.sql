-- Claim for :token up to :limit due deliveries, oldest first within each endpoint, and no more for an
-- endpoint than :per_endpoint less those it has under an unexpired lease anywhere in the cluster: one slow
-- endpoint holds at most :per_endpoint deliveries, never another endpoint's. Endpoints take turns at
-- random. Each is leased for :lease_seconds; a node that dies with it leaves it to be taken again when the
-- lease ends. Returns what to send: the URL, the body (the same on every attempt), the secrets to sign with
-- (the previous one while its window lasts) and the attempts made before.
WITH ready AS (
    SELECT w.id, :per_endpoint - (SELECT count(*) FROM einmal.webhook_deliveries d
                                  WHERE d.endpoint_id = w.id AND d.lease_until IS NOT NULL
                                    AND d.lease_until > now() AND d.state = 'pending') AS room
    FROM einmal.webhook_endpoints w
    WHERE w.disabled_at IS NULL
      AND EXISTS (SELECT 1 FROM einmal.webhook_deliveries d
                  WHERE d.endpoint_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= now())
), picked AS MATERIALIZED (
    SELECT d.event_id, d.endpoint_id
    FROM (SELECT * FROM ready WHERE room > 0 ORDER BY random() LIMIT :limit) r
    CROSS JOIN LATERAL (
        SELECT d.event_id, d.endpoint_id FROM einmal.webhook_deliveries d
        WHERE d.endpoint_id = r.id AND d.state = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until <= now())
        ORDER BY d.next_attempt_at, d.event_id
        LIMIT r.room
        FOR UPDATE SKIP LOCKED
    ) d
    LIMIT :limit
), leased AS (
    UPDATE einmal.webhook_deliveries d
    SET claimed_by = :token, lease_until = now() + make_interval(secs => :lease_seconds)
    FROM picked p
    WHERE d.event_id = p.event_id AND d.endpoint_id = p.endpoint_id
    RETURNING d.event_id, d.endpoint_id, d.attempts
)
SELECT l.event_id, l.endpoint_id, l.attempts, w.url, w.secret,
       CASE WHEN w.previous_until > now() THEN w.previous_secret END AS previous_secret,
       jsonb_build_object('type', e.type, 'timestamp', e.created_at, 'sequence', e.sequence,
                          'data', e.payload)::text AS body
FROM leased l
JOIN einmal.webhook_endpoints w ON w.id = l.endpoint_id
JOIN einmal.webhook_events e ON e.id = l.event_id
