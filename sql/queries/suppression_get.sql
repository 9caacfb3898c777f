-- The suppression of account :account_id for mailbox key :email_key, or no row.
SELECT email_lower, reason, created_at FROM einmal.suppressions
    WHERE account_id = :account_id AND email_lower = :email_key
