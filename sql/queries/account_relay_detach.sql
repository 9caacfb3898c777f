-- Account :account_id no longer sends through relay :relay_name; no row: it did not.
DELETE FROM einmal.account_relays ar USING einmal.relays r
 WHERE ar.relay_id = r.id AND r.name = :relay_name AND ar.account_id = :account_id
RETURNING ar.relay_id
