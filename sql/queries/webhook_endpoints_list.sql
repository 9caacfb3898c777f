-- Account :account_id's endpoints, oldest first, with their deliveries pending and parked (never a secret).
SELECT w.id, w.url, w.events, w.created_at, w.disabled_at, w.disabled_reason, w.previous_until,
       count(d.event_id) FILTER (WHERE d.state = 'pending') AS pending,
       count(d.event_id) FILTER (WHERE d.state = 'parked') AS parked
FROM einmal.webhook_endpoints w
LEFT JOIN einmal.webhook_deliveries d ON d.endpoint_id = w.id AND d.state <> 'delivered'
WHERE w.account_id = :account_id
GROUP BY w.id
ORDER BY w.id
