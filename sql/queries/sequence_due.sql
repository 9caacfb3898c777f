-- The running sequences with a member due now (one probe of sequence_members_due each), with the segment rule that
-- narrows each (NULL: none); a paused one is not swept
SELECT q.id, q.account_id, q.segment_rule::text AS segment_rule FROM einmal.sequences AS q
WHERE q.status = 'running'
  AND EXISTS (SELECT 1 FROM einmal.sequence_members AS m WHERE m.sequence_id = q.id AND m.due_at <= now())
ORDER BY q.id
