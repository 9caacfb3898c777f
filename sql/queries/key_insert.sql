-- A new key of account :account_id: its name :key_name, scope :scope, shown prefix :prefix and SHA-256 :digest; its row.
INSERT INTO einmal.api_keys (account_id, name, scope, prefix, hash) VALUES (:account_id, :key_name, :scope, :prefix, :digest) RETURNING id, name, scope, prefix, created_at, used_at, revoked_at
