-- Revoke key :key_id of the account named :account (compare-and-set: a revoked key stays as it was revoked).
UPDATE einmal.api_keys AS k SET revoked_at = now()
FROM einmal.accounts AS a
WHERE a.id = k.account_id AND a.name = :account AND k.id = :key_id AND k.revoked_at IS NULL
RETURNING k.id
