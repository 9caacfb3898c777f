-- Revoke key :key_id of account :account_id, unless it is revoked already (compare-and-set); its row, or none when account
-- :account_id has no such key that is not revoked.
UPDATE einmal.api_keys SET revoked_at = now()
WHERE account_id = :account_id AND id = :key_id AND revoked_at IS NULL
RETURNING id, name, scope, prefix, created_at, used_at, revoked_at
