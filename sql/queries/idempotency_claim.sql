-- Claim Idempotency-Key :idem_key of API key :key_hash for the request hashed :request_hash: a row when this request
-- may run — new, or its earlier claim older than the window :window_seconds seconds, or claimed without an answer
-- for :takeover_seconds seconds (its node died mid-request). No row: another request holds it or answered it
-- (idempotency_get).
INSERT INTO einmal.api_requests AS r (key_hash, idem_key, request_hash) VALUES (:key_hash, :idem_key, :request_hash)
ON CONFLICT (key_hash, idem_key) DO UPDATE
SET request_hash = excluded.request_hash, status = NULL, content_type = NULL, body = NULL, claimed_at = now()
WHERE r.claimed_at < now() - make_interval(secs => :window_seconds)
   OR (r.status IS NULL AND r.claimed_at < now() - make_interval(secs => :takeover_seconds)
       AND r.request_hash = excluded.request_hash)
RETURNING true
