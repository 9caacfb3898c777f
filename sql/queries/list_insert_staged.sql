-- Create the lists the staged rows join that account :account_id does not have yet (a list only left, not).
INSERT INTO einmal.lists (account_id, name)
SELECT DISTINCT :account_id::bigint, list_name FROM pg_temp.einmal_import
WHERE list_name IS NOT NULL AND state <> 'left'
ON CONFLICT (account_id, name) DO NOTHING
