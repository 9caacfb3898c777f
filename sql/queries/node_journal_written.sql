-- This node's tokens (:tokens) have written their journal on the primary :primary ('<system identifier>:<timeline>'):
-- the barrier after a failover (docs/design.md#liveness) no longer waits for them.
UPDATE einmal.nodes SET journal_written_on = :primary WHERE id = ANY (:tokens::text[])
