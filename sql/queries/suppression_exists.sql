-- Whether mailbox key :email_key (service/addresses.py email_key) is suppressed for account :account_id.
SELECT EXISTS (SELECT 1 FROM einmal.suppressions WHERE account_id = :account_id AND email_lower = :email_key)
