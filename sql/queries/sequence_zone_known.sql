-- Whether PostgreSQL knows the time zone :zone by that name (a step's send window is computed there)
SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = :zone)
