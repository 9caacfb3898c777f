-- Add the staged addresses account $1 does not have yet (same exact email; the name of the
-- address's first row in the file), and merge the staged attributes into every row: a key the
-- file has takes the file's value (a later row of one address over an earlier one), a key it
-- lacks keeps the stored value. Returns how many subscribers were added and how many existing
-- ones had their attributes changed.
WITH staged AS (
    SELECT DISTINCT ON (email) line, email, email_key, name FROM pg_temp.einmal_import ORDER BY email, line
), merged AS (
    SELECT i.email, jsonb_object_agg(a.key, a.value ORDER BY i.line) AS attributes
    FROM pg_temp.einmal_import AS i, jsonb_each(i.attributes) AS a
    GROUP BY i.email
), upserted AS (
    INSERT INTO einmal.subscribers AS s (account_id, email, email_lower, name, attributes)
    SELECT $1::bigint, st.email, st.email_key, st.name, coalesce(m.attributes, '{}')
    FROM staged AS st LEFT JOIN merged AS m USING (email)
    ORDER BY st.line
    ON CONFLICT (account_id, email) DO UPDATE SET attributes = s.attributes || EXCLUDED.attributes
    WHERE NOT s.attributes @> EXCLUDED.attributes
    RETURNING xmax = 0 AS inserted  -- xmax is 0 on a row this statement inserted, not on one it updated
)
SELECT count(*) FILTER (WHERE inserted) AS added, count(*) FILTER (WHERE NOT inserted) AS changed FROM upserted
