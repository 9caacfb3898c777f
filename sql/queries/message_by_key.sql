-- the message of account :account_id with Idempotency-Key :idempotency_key, if it is kept
SELECT campaign_id FROM einmal.messages WHERE account_id = :account_id AND idempotency_key = :idempotency_key
