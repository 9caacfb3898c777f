-- The ids of account :account_id's lists: a campaign to a segment alone goes through a confirmed membership of any
-- of them.
SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM einmal.lists WHERE account_id = :account_id
