-- This node's tokens ($1) have written their journal on the primary $2 ('<system identifier>:<timeline>'):
-- the barrier after a failover (docs/design.md#liveness) no longer waits for them.
UPDATE einmal.nodes SET journal_written_on = $2 WHERE id = ANY ($1::text[])
