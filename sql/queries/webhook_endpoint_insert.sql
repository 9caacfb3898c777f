-- A new endpoint of account :account_id: its URL (checked by service/webhooks/policy.py), the event types it
-- subscribes to, its signing secret.
INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret)
VALUES (:account_id, :url, :events::text[], :secret)
RETURNING id, url, events, created_at
