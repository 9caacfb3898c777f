-- Remove the suppressions of account $1 for the mailbox keys $2 (service/addresses.py: email_key
-- of each address, as the suppressions were stored); returns the keys removed.
DELETE FROM einmal.suppressions
WHERE account_id = $1 AND email_lower = ANY ($2::text[])
RETURNING email_lower
