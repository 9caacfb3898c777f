-- Create the lists the staged rows name that account :account_id does not have yet (a list only left too: its
-- departures are kept, list_members_insert_staged.sql).
INSERT INTO einmal.lists (account_id, name)
SELECT DISTINCT :account_id::bigint, list_name FROM pg_temp.einmal_import WHERE list_name IS NOT NULL
ON CONFLICT (account_id, name) DO NOTHING
