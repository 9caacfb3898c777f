-- Whether mailbox key $2 (service/addresses.py email_key) is suppressed for account $1.
SELECT EXISTS (SELECT 1 FROM einmal.suppressions WHERE account_id = $1 AND email_lower = $2)
