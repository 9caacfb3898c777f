-- Keep the staged chunk's rows, one per line (a row naming two lists is staged twice), among those the import has
-- seen: before the chunk moves, so that its rows can tell whether an earlier row named their mailbox. A row that
-- only leaves lists makes no subscriber, and is not kept.
INSERT INTO pg_temp.einmal_import_seen (email_key, line, email, name)
SELECT DISTINCT ON (line) email_key, line, email, name FROM pg_temp.einmal_import WHERE state <> 'left' ORDER BY line
