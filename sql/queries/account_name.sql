-- The name of account :account_id.
SELECT name FROM einmal.accounts WHERE id = :account_id
