-- Delete account :account_id's segment :segment_name; no row: it has none of that name. Campaigns made from it
-- keep its name and rule.
DELETE FROM einmal.segments WHERE account_id = :account_id AND name = :segment_name RETURNING id
