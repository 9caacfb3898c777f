-- The name of account $1.
SELECT name FROM einmal.accounts WHERE id = $1
