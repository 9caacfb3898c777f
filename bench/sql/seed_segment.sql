-- $1 subscribers of one account for the segment build: every 50th an upper-case copy of the address before it
-- (the same mailbox); all on list 'one', every 20th also on 'churned'; attributes plan (pro, free, team in turn)
-- and age (0-79); joined over the last two years, a day apart in turn; one address in a thousand suppressed
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ('bench') RETURNING id
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT a.id, n FROM a, unnest(ARRAY['one', 'churned']) n
    RETURNING id, name
), s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes, created_at)
    SELECT a.id,
           CASE WHEN i % 50 = 0 THEN 'USER' || (i - 1) || '@EXAMPLE.COM' ELSE 'user' || i || '@example.com' END,
           CASE WHEN i % 50 = 0 THEN 'user' || (i - 1) || '@example.com' ELSE 'user' || i || '@example.com' END,
           'User ' || i,
           jsonb_build_object('plan', (ARRAY['pro', 'free', 'team'])[i % 3 + 1], 'age', i % 80),
           now() - make_interval(days => i % 730)
    FROM a, generate_series(1, $1) i
    RETURNING id
), m AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id)
    SELECT l.id, s.id FROM l, s WHERE l.name = 'one' OR s.id % 20 = 0
), x AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT a.id, 'user' || i || '@example.com', 'manual' FROM a, generate_series(7, $1, 1000) i
)
SELECT count(*) FROM s
