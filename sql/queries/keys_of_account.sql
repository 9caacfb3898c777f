-- The keys of account :account_id, oldest first, revoked ones included (for the API: the account by its id).
SELECT id, name, scope, prefix, created_at, used_at, revoked_at
FROM einmal.api_keys
WHERE account_id = :account_id
ORDER BY id
