-- A new key of account $1: its name $2, scope $3, shown prefix $4 and SHA-256 $5; its row.
INSERT INTO einmal.api_keys (account_id, name, scope, prefix, hash) VALUES ($1, $2, $3, $4, $5) RETURNING id, name, scope, prefix, created_at, used_at, revoked_at
