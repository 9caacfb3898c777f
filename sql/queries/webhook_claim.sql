-- Claim for :token up to :limit due deliveries, after webhook_claim_lock in the same transaction: its
-- snapshot, taken once the lock is held, sees every lease of the claims before it, so that two nodes
-- claiming at once together keep within the caps (docs/design.md#webhooks):
--   an endpoint: :per_endpoint in flight anywhere in the cluster, less those it has under a lease;
--   an account: its share, the least of :per_account and :slots divided by the accounts that have
--   deliveries due or in flight (at least 1), less those it has under a lease.
-- Accounts take turns (each one's first delivery, then each one's second…), endpoints of an account take
-- turns at random, oldest first within an endpoint. Each is leased for :lease_seconds; a node that dies
-- with it leaves it to be taken again when the lease ends. Returns what to send: the URL, the body (the
-- same on every attempt), the secrets to sign with (the previous one while its window lasts) and the
-- attempts made before.
WITH flying AS (
    SELECT d.endpoint_id, w.account_id, count(*) AS n
    FROM einmal.webhook_deliveries d
    JOIN einmal.webhook_endpoints w ON w.id = d.endpoint_id
    WHERE d.lease_until IS NOT NULL AND d.lease_until > now() AND d.state = 'pending'
    GROUP BY d.endpoint_id, w.account_id
), ready AS (
    SELECT w.id, w.account_id,
           :per_endpoint::integer - coalesce((SELECT f.n FROM flying f WHERE f.endpoint_id = w.id), 0) AS room
    FROM einmal.webhook_endpoints w
    WHERE w.disabled_at IS NULL
      AND EXISTS (SELECT 1 FROM einmal.webhook_deliveries d
                  WHERE d.endpoint_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= now()
                    AND (d.lease_until IS NULL OR d.lease_until <= now()))
), working AS (
    SELECT account_id FROM ready UNION SELECT account_id FROM flying
), accounts AS (
    SELECT k.account_id,
           least(:per_account::integer, greatest(1, :slots::integer / (SELECT count(*) FROM working)))
           - coalesce((SELECT sum(f.n) FROM flying f WHERE f.account_id = k.account_id), 0) AS room
    FROM working k
), turns AS (
    SELECT r.id, r.account_id, least(r.room, a.room) AS room, a.room AS account_room,
           row_number() OVER (PARTITION BY r.account_id ORDER BY random()) AS turn
    FROM ready r
    JOIN accounts a ON a.account_id = r.account_id
    WHERE r.room > 0 AND a.room > 0
), candidates AS MATERIALIZED (
    SELECT d.event_id, d.endpoint_id, t.account_id, t.account_room, t.turn, d.k
    FROM (SELECT * FROM turns WHERE turn <= account_room ORDER BY turn, random() LIMIT :limit) t
    CROSS JOIN LATERAL (
        SELECT d.event_id, d.endpoint_id, row_number() OVER (ORDER BY d.next_attempt_at, d.event_id) AS k
        FROM (SELECT d.event_id, d.endpoint_id, d.next_attempt_at FROM einmal.webhook_deliveries d
              WHERE d.endpoint_id = t.id AND d.state = 'pending' AND d.next_attempt_at <= now()
                AND (d.lease_until IS NULL OR d.lease_until <= now())
              ORDER BY d.next_attempt_at, d.event_id
              LIMIT t.room
              FOR UPDATE SKIP LOCKED) d
    ) d
), picked AS MATERIALIZED (
    SELECT c.event_id, c.endpoint_id
    FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id ORDER BY c.k, c.turn) AS place
          FROM candidates c) c
    WHERE c.place <= c.account_room
    ORDER BY c.place, random()
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
