-- Replay endpoint :id of account :account_id: its parked deliveries are pending again, due now, with their
-- attempts counted from zero, and the endpoint is enabled again if a 410 disabled it. Returns the endpoint
-- (none: not this account's), the deliveries made pending, and since when it was disabled (NULL: it was
-- not): no event was written for it from then on, so none of that time can be replayed.
WITH before AS (
    SELECT id, disabled_at FROM einmal.webhook_endpoints WHERE id = :id AND account_id = :account_id FOR UPDATE
), endpoint AS (
    UPDATE einmal.webhook_endpoints e SET disabled_at = NULL, disabled_reason = NULL
    FROM before
    WHERE e.id = before.id
    RETURNING e.id, before.disabled_at
), replayed AS (
    UPDATE einmal.webhook_deliveries d
    SET state = 'pending', attempts = 0, next_attempt_at = now(), claimed_by = NULL, lease_until = NULL
    FROM endpoint
    WHERE d.endpoint_id = endpoint.id AND d.state = 'parked'
    RETURNING 1
)
SELECT e.id, e.disabled_at, (SELECT count(*) FROM replayed) AS replayed, pg_notify('einmal_webhook', '') AS woke
FROM endpoint e
