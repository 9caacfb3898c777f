-- Remove the suppressions of account $1 for the addresses $2 (compared in lower case);
-- returns the addresses removed.
DELETE FROM einmal.suppressions
WHERE account_id = $1 AND email_lower = ANY (SELECT lower(address) FROM unnest($2::text[]) AS address)
RETURNING email_lower
