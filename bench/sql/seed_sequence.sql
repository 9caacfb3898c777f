-- A sequence :$2 of three steps (delays 0, 3 days, 7 days) on a list of $1 members of account 'bench', their progress
-- written as the sweep would have left it: $3 of them due now, half of those at step 2 with their step-1 row sent;
-- the others due in the days to come. Returns the sequence's id.
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ('bench-' || $2) RETURNING id
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT a.id, 'welcome' FROM a RETURNING id, account_id
), s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT l.account_id, $2 || '-' || i || '@example.com', $2 || '-' || i || '@example.com', 'User ' || i
    FROM l, generate_series(1, $1) i
    RETURNING id, account_id
), m AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM l, s
)
INSERT INTO einmal.sequences (account_id, list_id, name) SELECT account_id, id, $2 FROM l RETURNING id
