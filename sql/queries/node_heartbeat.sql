INSERT INTO einmal.nodes (id, hostname, pid) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
