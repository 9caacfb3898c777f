-- Remove the doctor's findings past their expiry: how many rows.
WITH gone AS (DELETE FROM einmal.doctor_reports WHERE expires_at < now() RETURNING 1)
SELECT count(*) FROM gone
