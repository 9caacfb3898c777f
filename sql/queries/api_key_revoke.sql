-- Revoke key $2 of the account named $1 (compare-and-set: a revoked key stays as it was revoked).
UPDATE einmal.api_keys AS k SET revoked_at = now()
FROM einmal.accounts AS a
WHERE a.id = k.account_id AND a.name = $1 AND k.id = $2 AND k.revoked_at IS NULL
RETURNING k.id
