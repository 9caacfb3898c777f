-- The rows of the import that repeat an earlier row's mailbox key, in file order: each with the line, spelling and
-- name of the first row of its key.
SELECT line, email, name, first_line, first_email, first_name
FROM (
    SELECT line, email, name,
           first_value(line) OVER w AS first_line,
           first_value(email) OVER w AS first_email,
           first_value(name) OVER w AS first_name
    FROM pg_temp.einmal_import_seen
    WINDOW w AS (PARTITION BY email_key ORDER BY line)
) AS r
WHERE line > first_line
ORDER BY line
