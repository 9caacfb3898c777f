-- Count one hit of client $2 for kind $1 in the current window of $3 seconds: the window's hits now,
-- and the seconds until it ends.
INSERT INTO einmal.client_counts AS c (kind, client, window_start, hits)
VALUES ($1, $2, date_bin(make_interval(secs => $3), now(), timestamptz '2000-01-01'), 1)
ON CONFLICT (kind, client, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits, extract(epoch FROM c.window_start + make_interval(secs => $3) - now())::float8 AS rest
