-- The suppressions of account $1 by mailbox key, after key $2 (cursor), at most $3.
SELECT email_lower, reason, created_at FROM einmal.suppressions
WHERE account_id = $1 AND email_lower > $2
ORDER BY email_lower
LIMIT $3
