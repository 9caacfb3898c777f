-- Claim a webhook's one-time token :token for the event whose content hashes to :digest, kept until :expires_at
-- (seconds since the epoch): returns the hash the token was first claimed with, :digest unless an earlier request
-- used it (DO UPDATE, not DO NOTHING, so that the earlier row is returned, also when it is being committed).
INSERT INTO einmal.webhook_tokens (token, digest, expires_at) VALUES (:token, :digest, to_timestamp(:expires_at))
ON CONFLICT (token) DO UPDATE SET token = EXCLUDED.token
RETURNING digest
