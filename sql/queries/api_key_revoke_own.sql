-- Revoke key $2 of account $1, unless it is revoked already (compare-and-set); its row, or none when account
-- $1 has no such key that is not revoked.
UPDATE einmal.api_keys SET revoked_at = now()
WHERE account_id = $1 AND id = $2 AND revoked_at IS NULL
RETURNING id, name, scope, prefix, created_at, used_at, revoked_at
