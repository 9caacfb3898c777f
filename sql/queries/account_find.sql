-- The id of the account named :account, or no row.
SELECT id FROM einmal.accounts WHERE name = :account
