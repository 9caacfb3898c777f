-- Lock sequence :sequence_id of account :account_id while its steps change (a step added, deleted, paused or
-- resumed): two changes of one sequence take turns. No row: not the account's. FOR NO KEY UPDATE, not FOR UPDATE:
-- a member's join (its foreign key's KEY SHARE of this row) does not wait for it, for a step's creation holds it
-- while its partition's attach waits for the subscribers' writers, and a writer may wait for that join.
SELECT id, status, list_id, name FROM einmal.sequences
WHERE id = :sequence_id AND account_id = :account_id
FOR NO KEY UPDATE
