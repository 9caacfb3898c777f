-- Idempotency-Key :idem_key of API key :key_hash: the request it was claimed for and its answer (status NULL: running).
SELECT request_hash, status, content_type, body FROM einmal.api_requests
    WHERE key_hash = :key_hash AND idem_key = :idem_key
