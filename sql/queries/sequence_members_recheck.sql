-- After step :position of sequence :sequence_id was added, or its delay changed to :delay_seconds: its members on the
-- list not past it are due no later than that delay after their join, so that the sweep looks at them then (a
-- member due earlier keeps its time; one found early is set to the right time by the sweep). One statement, once
-- per change, never per tick; it writes only the rows it moves: members past the step, due earlier, or left are
-- not touched, so its cost is that of the members who finished the sequence (due NULL) or are due later.
UPDATE einmal.sequence_members
SET due_at = joined_at + make_interval(secs => :delay_seconds)
WHERE sequence_id = :sequence_id AND left_at IS NULL AND last_position < :position
  AND (due_at IS NULL OR due_at > joined_at + make_interval(secs => :delay_seconds))
