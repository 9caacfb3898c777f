-- name this session in pg_stat_activity ("einmal <actor> <token>"), so that an operator (or a test)
-- can tell which actor of which node a backend serves; RESET ALL on release to the pool undoes it
SELECT set_config('application_name', :name, false)
