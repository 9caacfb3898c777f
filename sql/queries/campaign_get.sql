-- The campaign's status and schedule (:campaign_id: its id); `now` is the database's clock, to say how long until.
SELECT id, name, status, scheduled_for, started_at, created_at, now() AS now FROM einmal.campaigns WHERE id = :campaign_id
