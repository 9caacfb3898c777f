-- Claim Idempotency-Key $2 of API key $1 for the request hashed $3: a row when this request may run — new,
-- or its earlier claim older than the window $4 seconds, or claimed without an answer for $5 seconds (its
-- node died mid-request). No row: another request holds it or answered it (idempotency_get).
INSERT INTO einmal.api_requests AS r (key_hash, idem_key, request_hash) VALUES ($1, $2, $3)
ON CONFLICT (key_hash, idem_key) DO UPDATE
SET request_hash = excluded.request_hash, status = NULL, content_type = NULL, body = NULL, claimed_at = now()
WHERE r.claimed_at < now() - make_interval(secs => $4)
   OR (r.status IS NULL AND r.claimed_at < now() - make_interval(secs => $5) AND r.request_hash = excluded.request_hash)
RETURNING true
