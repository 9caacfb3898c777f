-- Lock sequence :sequence_id of account :account_id while its steps change (a step added, deleted, paused or
-- resumed): two changes of one sequence take turns. No row: not the account's.
SELECT id, status, list_id, name FROM einmal.sequences
WHERE id = :sequence_id AND account_id = :account_id
FOR UPDATE
