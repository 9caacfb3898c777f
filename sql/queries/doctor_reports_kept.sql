-- The doctor's findings kept for account :account_id (one row per domain checked, not yet expired), newest first.
SELECT domain, findings::text AS findings, checked_at
FROM einmal.doctor_reports
WHERE account_id = :account_id AND expires_at > now()
ORDER BY checked_at DESC
