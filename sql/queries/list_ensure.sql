-- List :list_name of account :account_id, made when it does not exist: its id, and whether it is new.
WITH made AS (
    INSERT INTO einmal.lists (account_id, name) VALUES (:account_id, :list_name) 
        ON CONFLICT (account_id, name) DO NOTHING
    RETURNING id
)
SELECT id, true AS created FROM made
UNION ALL SELECT id, false FROM einmal.lists
    WHERE account_id = :account_id AND name = :list_name AND NOT EXISTS (SELECT 1 FROM made)
