-- The hits of client $2 for kind $1 in the current window of $3 seconds (0: none), and the seconds until
-- that window ends.
SELECT coalesce((SELECT c.hits FROM einmal.client_counts AS c
                 WHERE c.kind = $1 AND c.client = $2
                   AND c.window_start = date_bin(make_interval(secs => $3), now(), timestamptz '2000-01-01')), 0)
           AS hits,
       extract(epoch FROM date_bin(make_interval(secs => $3), now(), timestamptz '2000-01-01')
                          + make_interval(secs => $3) - now())::float8 AS rest
