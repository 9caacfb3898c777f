-- Remove the suppressions of account :account_id for the mailbox keys :keys (service/addresses.py: email_key
-- of each address, as the suppressions were stored); returns the keys removed.
DELETE FROM einmal.suppressions
WHERE account_id = :account_id AND email_lower = ANY (:keys::text[])
RETURNING email_lower
