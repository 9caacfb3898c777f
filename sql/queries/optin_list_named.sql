-- The id of account $1's list named $2 and the account's language, or no row.
SELECT l.id, a.language FROM einmal.lists AS l JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.account_id = $1 AND l.name = $2
