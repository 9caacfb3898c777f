-- The accounts, at most two: an installation whose webhooks use a global credential has one.
SELECT id, name FROM einmal.accounts ORDER BY id LIMIT 2
