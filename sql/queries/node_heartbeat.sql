INSERT INTO einmal.nodes (id, hostname, pid) VALUES (:token, :hostname, :pid)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()
