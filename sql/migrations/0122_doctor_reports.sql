-- The doctor's findings from DNS, per account and From domain (service/accounts/doctor.py, docs/design.md#doctor):
-- read by every node, so that GET /api/v1/doctor and approve ask DNS once per EINMAL_DOCTOR_CACHE_SECONDS
-- whichever node or process asks. `inputs` is a digest of what the questions depend on (the DKIM selectors and
-- public keys, the envelope domain, the relays, the DNS servers): a row of other inputs is not the answer.
-- Rows past their expiry are removed by the pruner.
CREATE TABLE einmal.doctor_reports (
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id) ON DELETE CASCADE,
    domain      text NOT NULL,
    inputs      text NOT NULL,
    findings    jsonb NOT NULL,
    checked_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, domain)
);
CREATE INDEX doctor_reports_expires ON einmal.doctor_reports (expires_at);
