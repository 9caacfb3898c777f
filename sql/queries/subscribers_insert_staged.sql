-- Add the staged addresses account $1 does not have yet (same exact email);
-- within the file the first row wins. Returns how many were added.
WITH added AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes)
    SELECT $1::bigint, email, email_key, name, attributes FROM pg_temp.einmal_import ORDER BY line
    ON CONFLICT (account_id, email) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM added
