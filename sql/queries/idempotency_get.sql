-- Idempotency-Key $2 of API key $1: the request it was claimed for and its answer (status NULL: running).
SELECT request_hash, status, content_type, body FROM einmal.api_requests WHERE key_hash = $1 AND idem_key = $2
