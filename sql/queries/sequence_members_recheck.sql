-- After step :position of sequence :sequence_id was added, or its delay changed, or a step before it deleted: its
-- members on the list not past it that are done (due_at NULL) or due later than now are made due now, and the sweep
-- sets each to its time (its delay after its previous step's send: 'early', due then) or queues the step. A member
-- due now or earlier keeps its time. One statement, once per change, never per tick; it writes only the rows it
-- moves: members past the step, due now, or left are not touched.
UPDATE einmal.sequence_members
SET due_at = now()
WHERE sequence_id = :sequence_id AND left_at IS NULL AND last_position < :position
  AND (due_at IS NULL OR due_at > now())
