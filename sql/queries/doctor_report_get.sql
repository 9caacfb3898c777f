-- The doctor's findings from DNS kept for the account's :domain, when they were made of the same :inputs and
-- have not expired: one row or none.
SELECT findings
FROM einmal.doctor_reports
WHERE account_id = :account_id AND domain = :domain AND inputs = :inputs AND expires_at > now()
