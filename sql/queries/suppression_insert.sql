-- Suppress the mailbox keys $2 (service/addresses.py: email_key of each
-- address) for account $1 with reason $3. Returns how many distinct keys were
-- given and how many of those were newly suppressed; each new row NOTIFYs
-- einmal_suppression through the table's trigger.
WITH given AS (
    SELECT DISTINCT key AS email_lower FROM unnest($2::text[]) AS key
), added AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT $1::bigint, email_lower, $3 FROM given
    ON CONFLICT (account_id, email_lower) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM given) AS given, (SELECT count(*) FROM added) AS added
