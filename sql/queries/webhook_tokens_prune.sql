-- Forget the one-time tokens whose timestamps can no longer be accepted.
DELETE FROM einmal.webhook_tokens WHERE expires_at < now()
