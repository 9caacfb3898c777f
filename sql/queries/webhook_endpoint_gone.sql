-- Endpoint :endpoint_id answered 410 Gone: it is disabled with :reason, and its pending deliveries are
-- parked (visible, replayable with webhook_replay.sql).
WITH disabled AS (
    UPDATE einmal.webhook_endpoints SET disabled_at = now(), disabled_reason = :reason
    WHERE id = :endpoint_id AND disabled_at IS NULL
    RETURNING id
)
UPDATE einmal.webhook_deliveries d SET state = 'parked', claimed_by = NULL, lease_until = NULL
WHERE d.endpoint_id = :endpoint_id AND d.state = 'pending'
RETURNING d.event_id
