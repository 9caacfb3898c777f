-- The suppressions of account :account_id by mailbox key, after key :after_key (cursor), at most :limit.
SELECT email_lower, reason, created_at FROM einmal.suppressions
WHERE account_id = :account_id AND email_lower > :after_key
ORDER BY email_lower
LIMIT :limit
