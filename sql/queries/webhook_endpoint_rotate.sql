-- Endpoint :id of account :account_id signs with :secret from now on, and with its current secret too for
-- :window_seconds more seconds (a rotation within a window replaces the older secret kept).
UPDATE einmal.webhook_endpoints
SET previous_secret = secret, previous_until = now() + make_interval(secs => :window_seconds), secret = :secret
WHERE id = :id AND account_id = :account_id
RETURNING id, previous_until
