-- Remove endpoint :id of account :account_id, with its deliveries (the events stay until pruned).
DELETE FROM einmal.webhook_endpoints WHERE id = :id AND account_id = :account_id RETURNING id
