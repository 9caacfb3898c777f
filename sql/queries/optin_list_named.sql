-- The id of account $1's list named $2, or no row.
SELECT id FROM einmal.lists WHERE account_id = $1 AND name = $2
