-- Account :account_id's segment :segment_name, or no row (another account's included).
SELECT id, name, rule, created_at, updated_at FROM einmal.segments
WHERE account_id = :account_id AND name = :segment_name
