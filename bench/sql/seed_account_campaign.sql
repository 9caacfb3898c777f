-- account $1 with one list of $2 distinct addresses, a draft campaign with body $3, and its own relay, named
-- $4 at URL $5 (einmal.relays, einmal.account_relays): the campaign's id
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ($1) RETURNING id
), r AS (
    INSERT INTO einmal.relays (name, url) VALUES ($4, $5) RETURNING id
), ar AS (
    INSERT INTO einmal.account_relays (account_id, relay_id) SELECT a.id, r.id FROM a, r
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT id, 'default' FROM a RETURNING id
), s AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT a.id, $1 || '.user' || i || '@example.com', $1 || '.user' || i || '@example.com', 'User ' || i
    FROM a, generate_series(1, $2) i
    RETURNING id
), m AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM l, s
)
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
SELECT a.id, 'bench', 'Hello {{ name }}', 'News <news@' || $1 || '.example.com>', $3, ARRAY[l.id] FROM a, l
RETURNING id
