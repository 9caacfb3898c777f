-- The live nodes that wrote their journal on another primary than :primary ('<system identifier>:<timeline>') and
-- not yet on this one: after a failover no node claims while one is left (docs/design.md#liveness). A node whose heartbeat
-- is older than :node_timeout_seconds seconds is dead: its journal died with it, and the scheduler returns its rows
-- (node_rescue). A node that has marked no primary yet has just started, on this primary: it has no journal.
SELECT id FROM einmal.nodes
WHERE journal_written_on <> :primary AND heartbeat_at >= now() - make_interval(secs => :node_timeout_seconds)
ORDER BY id
