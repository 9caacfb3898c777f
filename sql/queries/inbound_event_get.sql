SELECT payload_hash FROM einmal.inbound_events WHERE event_id = :event_id
