-- the Idempotency-Keys of messages made more than :key_seconds seconds ago forgotten (a request with one is then
-- new), at most :batch of them
UPDATE einmal.messages SET idempotency_key = NULL
WHERE campaign_id IN (SELECT campaign_id FROM einmal.messages
                      WHERE idempotency_key IS NOT NULL AND created_at < now() - make_interval(secs => :key_seconds)
                      ORDER BY created_at LIMIT :batch)
