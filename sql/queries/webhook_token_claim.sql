-- Claim a webhook's one-time token $1 for the event whose content hashes to $2, kept until $3 (seconds
-- since the epoch): returns the hash the token was first claimed with, $2 unless an earlier request used
-- it (DO UPDATE, not DO NOTHING, so that the earlier row is returned, also when it is being committed).
INSERT INTO einmal.webhook_tokens (token, digest, expires_at) VALUES ($1, $2, to_timestamp($3))
ON CONFLICT (token) DO UPDATE SET token = EXCLUDED.token
RETURNING digest
