-- A new message of account :account_id keyed by its Idempotency-Key :idempotency_key (NULL: none) under the
-- campaign id :campaign_id (einmal.message_ids): its row ON CONFLICT DO NOTHING, so that a retry with the key
-- inserts nothing (a concurrent one waits for the first's transaction and then finds it). Returns the id when it
-- was inserted; the caller then inserts its campaign and send row in the same transaction (the foreign key to
-- the campaign is checked at commit).
INSERT INTO einmal.messages (campaign_id, account_id, idempotency_key, template, data, honour_unsubscribe)
VALUES (:campaign_id, :account_id, :idempotency_key, :template, :data::jsonb, :honour_unsubscribe)
ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING campaign_id
