-- The suppressions of the account named :account, oldest first.
SELECT x.email_lower, x.reason, x.created_at
FROM einmal.suppressions AS x JOIN einmal.accounts AS a ON a.id = x.account_id
WHERE a.name = :account
ORDER BY x.created_at, x.email_lower
