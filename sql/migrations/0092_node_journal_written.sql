-- The primary each node has written its journal on (docs/design.md#liveness, the barrier after a failover):
-- '<system identifier>:<timeline>', set by the send pipeline's start once the node's journal is written
-- again there (or, at a start with nothing to write, at once). No node claims while another live node's
-- row names an older primary: the rows whose claims the failover lost are queued with no owner, and a
-- claim made before their owner's rewrite would send them again.
ALTER TABLE einmal.nodes ADD COLUMN journal_written_on text;
