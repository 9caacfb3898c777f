-- The id of the account named :name, created when missing, and whether this statement created it (xmax is 0 on
-- a row version that an INSERT wrote, set on one that the DO UPDATE wrote). DO UPDATE (not DO NOTHING)
-- so that the row is returned even when another transaction created it first.
INSERT INTO einmal.accounts (name) VALUES (:name)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING id, xmax = 0 AS created
