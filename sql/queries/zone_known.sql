-- Whether PostgreSQL knows the time zone :zone by that name (a step's send window, an account's time zone and a
-- campaign's local send times are computed there)
SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = :zone)
