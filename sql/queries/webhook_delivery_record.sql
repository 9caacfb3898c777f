-- The outcome of one attempt by :token of delivery (:event_id, :endpoint_id): :state 'delivered', 'pending'
-- (tried again in :delay_seconds) or 'parked'; the answer's status (:status, NULL for none) and :error. Only
-- while the delivery is still this token's and pending: a lease taken over since is the other node's.
UPDATE einmal.webhook_deliveries
SET state = :state, attempts = attempts + 1,
    next_attempt_at = now() + make_interval(secs => :delay_seconds),
    last_status = :status, last_error = :error,
    delivered_at = CASE WHEN :state = 'delivered' THEN now() END,
    claimed_by = NULL, lease_until = NULL
WHERE event_id = :event_id AND endpoint_id = :endpoint_id AND claimed_by = :token AND state = 'pending'
RETURNING attempts
