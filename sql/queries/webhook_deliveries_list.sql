-- The deliveries of endpoint :id of account :account_id in state :state (any when NULL), newest first, at
-- most :limit: read backwards along webhook_deliveries_newest (a delivery is made with its event, in the same
-- transaction), not sorted out of the endpoint's whole backlog.
SELECT d.event_id, e.type, e.sequence, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
       d.delivered_at, e.created_at
FROM einmal.webhook_deliveries d
JOIN einmal.webhook_endpoints w ON w.id = d.endpoint_id
JOIN einmal.webhook_events e ON e.id = d.event_id
WHERE w.id = :id AND w.account_id = :account_id AND (:state::text IS NULL OR d.state = :state::text)
ORDER BY d.created_at DESC, d.event_id DESC
LIMIT :limit
