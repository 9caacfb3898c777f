-- The answer to the request that claimed Idempotency-Key :idem_key of API key :key_hash (status :status, type
-- :content_type, body :body); status NULL: the request failed in a way a retry should run again, so the claim is
-- removed. Also removes claims older than the window :window_seconds seconds, a few at a time.
WITH answered AS (
    UPDATE einmal.api_requests SET status = :status, content_type = :content_type, body = :body
    WHERE key_hash = :key_hash AND idem_key = :idem_key AND :status::integer IS NOT NULL
), released AS (
    DELETE FROM einmal.api_requests WHERE key_hash = :key_hash AND idem_key = :idem_key AND :status::integer IS NULL
)
DELETE FROM einmal.api_requests
WHERE ctid = ANY (ARRAY(SELECT ctid FROM einmal.api_requests
                        WHERE claimed_at < now() - make_interval(secs => :window_seconds) LIMIT 100))
