-- The hits of :client for :kind in the current window of :window seconds (0: none), and the seconds until
-- that window ends.
SELECT coalesce((SELECT c.hits FROM einmal.client_counts AS c
                 WHERE c.kind = :kind AND c.client = :client
                   AND c.window_start = date_bin(make_interval(secs => :window), now(), timestamptz '2000-01-01')), 0)
           AS hits,
       extract(epoch FROM date_bin(make_interval(secs => :window), now(), timestamptz '2000-01-01')
                          + make_interval(secs => :window) - now())::float8 AS rest
