-- Account :account_id sends through relay :relay_name with :weight (again: the new weight); no row: no such relay.
INSERT INTO einmal.account_relays (account_id, relay_id, weight)
SELECT :account_id, id, :weight FROM einmal.relays WHERE name = :relay_name
ON CONFLICT (account_id, relay_id) DO UPDATE SET weight = excluded.weight
RETURNING relay_id
