-- Remove relay :relay_name unless an account sends through it: (found, used); no row: no such relay.
WITH r AS (
    SELECT id, EXISTS (SELECT 1 FROM einmal.account_relays ar WHERE ar.relay_id = relays.id) AS used
      FROM einmal.relays WHERE name = :relay_name),
gone AS (DELETE FROM einmal.relays d USING r WHERE d.id = r.id AND NOT r.used RETURNING d.id)
SELECT r.used, (SELECT count(*) FROM gone) AS removed FROM r
