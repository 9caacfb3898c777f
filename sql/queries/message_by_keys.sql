-- the messages of account :account_id whose Idempotency-Key is one of :idempotency_keys, if they are kept: a
-- batch's items made before (docs/design.md#messages)
SELECT idempotency_key, campaign_id FROM einmal.messages
WHERE account_id = :account_id AND idempotency_key = ANY(:idempotency_keys::text[])
