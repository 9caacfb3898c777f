-- Account :account_id's segment :segment_name takes the :rule (JSON, checked before). No row: it has none of that
-- name. Campaigns made from it keep the rule they were made with (campaigns.segment_rule).
UPDATE einmal.segments SET rule = :rule::jsonb, updated_at = now()
WHERE account_id = :account_id AND name = :segment_name
RETURNING id, name, rule, created_at, updated_at
