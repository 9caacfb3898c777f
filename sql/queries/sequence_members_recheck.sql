-- After step :position of sequence :sequence_id was added, or its delay changed to :delay_seconds: its members on the
-- list not past it are due no later than that delay after their join, so that the sweep looks at them then (a
-- member due earlier keeps its time; one found early is set to the right time by the sweep). One statement over the
-- sequence's members: a change of steps costs O(members) once, never per tick.
UPDATE einmal.sequence_members
SET due_at = least(coalesce(due_at, 'infinity'), joined_at + make_interval(secs => :delay_seconds))
WHERE sequence_id = :sequence_id AND left_at IS NULL AND last_position < :position
