-- Whether the address $2 is suppressed for account $1 (compared in lower case).
SELECT EXISTS (SELECT 1 FROM einmal.suppressions WHERE account_id = $1 AND email_lower = lower($2))
