-- List $2 of account $1, made when it does not exist: its id, and whether it is new.
WITH made AS (
    INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2) ON CONFLICT (account_id, name) DO NOTHING
    RETURNING id
)
SELECT id, true AS created FROM made
UNION ALL SELECT id, false FROM einmal.lists WHERE account_id = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM made)
