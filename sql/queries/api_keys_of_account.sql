-- The keys of account $1, oldest first, revoked ones included (for the API: the account by its id).
SELECT id, name, scope, prefix, created_at, used_at, revoked_at
FROM einmal.api_keys
WHERE account_id = $1
ORDER BY id
