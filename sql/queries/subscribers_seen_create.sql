-- The import's good rows, one per line, for the whole file (the staging table holds one chunk at a time): which
-- row of a mailbox key came first and which repeat it (subscribers_repeats_staged). Temporary, private to the
-- connection, dropped with the import's transaction.
CREATE TEMP TABLE pg_temp.einmal_import_seen (
    email_key text NOT NULL,
    line      bigint NOT NULL,
    email     text NOT NULL,
    name      text NOT NULL,
    PRIMARY KEY (email_key, line)
) ON COMMIT DROP
