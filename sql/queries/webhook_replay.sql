-- Replay endpoint :id of account :account_id: its parked deliveries are pending again, due now, with their
-- attempts counted from zero, and the endpoint is enabled again if a 410 disabled it. Returns the endpoint
-- (none: not this account's) and the deliveries made pending.
WITH endpoint AS (
    UPDATE einmal.webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL
    WHERE id = :id AND account_id = :account_id
    RETURNING id
), replayed AS (
    UPDATE einmal.webhook_deliveries d
    SET state = 'pending', attempts = 0, next_attempt_at = now(), claimed_by = NULL, lease_until = NULL
    FROM endpoint
    WHERE d.endpoint_id = endpoint.id AND d.state = 'parked'
    RETURNING 1
)
SELECT e.id, (SELECT count(*) FROM replayed) AS replayed, pg_notify('einmal_webhook', '') AS woke
FROM endpoint e
