-- The campaign's status and schedule ($1: its id); `now` is the database's clock, to say how long until.
SELECT id, name, status, scheduled_for, started_at, created_at, now() AS now FROM einmal.campaigns WHERE id = $1
