-- Count one hit of :client for :kind in the current window of :window seconds: the window's hits now,
-- and the seconds until it ends.
INSERT INTO einmal.client_counts AS c (kind, client, window_start, hits)
VALUES (:kind, :client, date_bin(make_interval(secs => :window), now(), timestamptz '2000-01-01'), 1)
ON CONFLICT (kind, client, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits, extract(epoch FROM c.window_start + make_interval(secs => :window) - now())::float8 AS rest
