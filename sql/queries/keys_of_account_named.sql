-- The keys of the account named :account, oldest first, revoked ones included.
SELECT k.id, k.name, k.scope, k.prefix, k.created_at, k.used_at, k.revoked_at
FROM einmal.api_keys AS k JOIN einmal.accounts AS a ON a.id = k.account_id
WHERE a.name = :account
ORDER BY k.id
