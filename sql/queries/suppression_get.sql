-- The suppression of account $1 for mailbox key $2, or no row.
SELECT email_lower, reason, created_at FROM einmal.suppressions WHERE account_id = $1 AND email_lower = $2
