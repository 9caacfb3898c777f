-- The sweep's first statement (docs/design.md#sequences): lock at most :limit members of sequence :sequence_id that are
-- due, FOR UPDATE SKIP LOCKED (a member another node is sweeping is left to it). sequence_sweep.sql then reads them,
-- and the rows of their steps, with a snapshot taken after these locks are held: a member that another sweep
-- advanced and committed while this one waited is read as it is now, with the row that sweep queued.
SELECT subscriber_id FROM einmal.sequence_members
WHERE sequence_id = :sequence_id AND due_at <= now()
ORDER BY due_at
LIMIT :limit
FOR UPDATE SKIP LOCKED
