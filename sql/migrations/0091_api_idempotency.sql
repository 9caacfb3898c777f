-- The POSTs of /api/v1 sent with an Idempotency-Key (docs/design.md#api): claimed before the request runs
-- (the row without an answer), answered after; the same key with the same request gets the answer again,
-- without a second effect. Keyed by the API key's SHA-256, so two keys never share a namespace. Kept for
-- the window of service/api/idempotency.py; older rows are removed as new ones come.
CREATE TABLE einmal.api_requests (
    key_hash      bytea NOT NULL,
    idem_key      text NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer,  -- NULL: claimed, running (or its node died: taken over after a while)
    content_type  text,
    body          bytea,
    claimed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_hash, idem_key)
);
CREATE INDEX api_requests_claimed ON einmal.api_requests (claimed_at);
