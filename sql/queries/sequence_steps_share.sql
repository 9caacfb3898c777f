-- The sweep's first statement: hold sequence :sequence_id's steps (not deleted) FOR SHARE until the sweep commits,
-- before any member is locked. A step's cancel (its delete) or any other change of its campaign row waits for the
-- sweep, and its sends_cancel then sees the rows the sweep queued; a sweep that waited reads the step as it now is.
-- Taken before the members (whose locks are SKIP LOCKED, never waited for): a change that waits for the members'
-- locks after its own lock of the campaign (sequence_members_recheck.sql, a leave from the preference page) closes
-- no circle with a sweep.
SELECT id FROM einmal.campaigns
WHERE sequence_id = :sequence_id AND kind = 'step' AND status IN ('sending', 'paused')
ORDER BY id
FOR SHARE
