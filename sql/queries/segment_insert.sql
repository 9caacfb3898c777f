-- A new segment :segment_name of account :account_id with its :rule (JSON, checked before:
-- service/segments/rules.py). No row: the account has a segment of that name.
INSERT INTO einmal.segments (account_id, name, rule)
VALUES (:account_id, :segment_name, :rule::jsonb)
ON CONFLICT (account_id, name) DO NOTHING
RETURNING id, name, rule, created_at, updated_at
