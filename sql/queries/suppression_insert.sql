-- Suppress the addresses $2 (compared in lower case, as PostgreSQL lowers them)
-- for account $1 with reason $3. Returns how many distinct addresses were given
-- and how many of those were newly suppressed; each new row NOTIFYs
-- einmal_suppression through the table's trigger.
WITH given AS (
    SELECT DISTINCT lower(address) AS email_lower FROM unnest($2::text[]) AS address
), added AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT $1::bigint, email_lower, $3 FROM given
    ON CONFLICT (account_id, email_lower) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM given) AS given, (SELECT count(*) FROM added) AS added
