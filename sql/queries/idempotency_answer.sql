-- The answer to the request that claimed Idempotency-Key $2 of API key $1 (status $3, type $4, body $5);
-- status NULL: the request failed in a way a retry should run again, so the claim is removed. Also removes
-- claims older than the window $6 seconds, a few at a time.
WITH answered AS (
    UPDATE einmal.api_requests SET status = $3, content_type = $4, body = $5
    WHERE key_hash = $1 AND idem_key = $2 AND $3::integer IS NOT NULL
), released AS (
    DELETE FROM einmal.api_requests WHERE key_hash = $1 AND idem_key = $2 AND $3::integer IS NULL
)
DELETE FROM einmal.api_requests
WHERE ctid = ANY (ARRAY(SELECT ctid FROM einmal.api_requests
                        WHERE claimed_at < now() - make_interval(secs => $6) LIMIT 100))
