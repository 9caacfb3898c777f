-- Keep the doctor's findings from DNS for the account's :domain for :seconds (the last run's replace any).
INSERT INTO einmal.doctor_reports AS r (account_id, domain, inputs, findings, expires_at)
VALUES (:account_id, :domain, :inputs, :findings::jsonb, now() + make_interval(secs => :seconds))
ON CONFLICT (account_id, domain) DO UPDATE
SET inputs = excluded.inputs, findings = excluded.findings, checked_at = now(), expires_at = excluded.expires_at
