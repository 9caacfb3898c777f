-- Remove the counts of windows that ended more than :keep seconds ago: how many rows.
WITH gone AS (DELETE FROM einmal.client_counts WHERE window_start < now() - make_interval(secs => :keep) RETURNING 1)
SELECT count(*) FROM gone
