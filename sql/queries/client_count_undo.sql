-- Take back one hit of :client for :kind in the current window of :window seconds (a hit counted before its
-- outcome was known, that turned out not to count: a console sign-in that succeeded).
UPDATE einmal.client_counts SET hits = hits - 1
WHERE kind = :kind AND client = :client AND hits > 0
  AND window_start = date_bin(make_interval(secs => :window), now(), timestamptz '2000-01-01')
