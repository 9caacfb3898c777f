-- The segments of account :account_id by name.
SELECT id, name, rule, created_at, updated_at FROM einmal.segments WHERE account_id = :account_id ORDER BY name
