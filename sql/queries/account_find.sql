-- The id of the account named $1, or no row.
SELECT id FROM einmal.accounts WHERE name = $1
