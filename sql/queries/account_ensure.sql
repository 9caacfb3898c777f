-- The id of the account named $1, created when missing. DO UPDATE (not DO NOTHING)
-- so that the row is returned even when another transaction created it first.
INSERT INTO einmal.accounts (name) VALUES ($1)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING id
