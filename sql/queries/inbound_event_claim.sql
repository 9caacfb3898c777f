-- claim an inbound event id: a row comes back only the first time; the caller
-- applies the event's effect in the same transaction
INSERT INTO einmal.inbound_events (event_id, payload_hash) VALUES (:event_id, :digest)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id
