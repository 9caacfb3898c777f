-- an account, one list of $1 distinct addresses and a draft campaign with body $2: its id
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ('bench') RETURNING id
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT id, 'default' FROM a RETURNING id
), s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT a.id, 'user' || i || '@example.com', 'user' || i || '@example.com', 'User ' || i
    FROM a, generate_series(1, $1) i
    RETURNING id
), m AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM l, s
)
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
SELECT a.id, 'bench', 'Hello {{ name }}', 'News <news@example.com>', $2, ARRAY[l.id] FROM a, l
RETURNING id
