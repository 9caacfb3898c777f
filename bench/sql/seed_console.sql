-- The console bench's account 'bench' (bench/console.py), a script run once (its :names are numbers the bench
-- puts in): :subscribers subscribers on its list 'news'; a campaign of :recipients of them, sending (its send
-- rows queued, in its own partition); and what the operations pages show: 3 campaigns of :history sent in the
-- last 30 days with their bounces and complaints, a webhook endpoint with 1,000 deliveries (a tenth parked),
-- 1,000 transactional messages, a list 'welcome' of 10,000 for a sequence (made by the bench).
CREATE TEMP TABLE seeded AS
WITH a AS (
    INSERT INTO einmal.accounts (name) VALUES ('bench') RETURNING id
), l AS (
    INSERT INTO einmal.lists (account_id, name) SELECT id, 'news' FROM a RETURNING id, account_id
), c AS (
    INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status,
                                  recipients_built_at, started_at)
    SELECT l.account_id, 'Spring sale', 'Hello', 'news@example.com', 'b', ARRAY[l.id], 'sending', now(), now()
    FROM l RETURNING id, account_id
)
SELECT c.id AS campaign_id, c.account_id, l.id AS list_id FROM c, l;

INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
SELECT s.account_id, 'user' || i || '@example.com', 'user' || i || '@example.com', 'User ' || i
FROM seeded s, generate_series(1, :subscribers) i;

INSERT INTO einmal.list_members (list_id, subscriber_id)
SELECT s.list_id, b.id FROM seeded s JOIN einmal.subscribers b ON b.account_id = s.account_id;

SELECT einmal.sends_partition(campaign_id) FROM seeded;

INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)
SELECT s.campaign_id, s.account_id, b.id, b.email, b.email_lower, 'campaign:' || s.campaign_id || ':' || b.id, 'queued'
FROM seeded s JOIN einmal.subscribers b ON b.account_id = s.account_id
WHERE b.id <= (SELECT min(id) FROM einmal.subscribers WHERE account_id = s.account_id) + :recipients - 1;

-- history: 3 campaigns of :history recipients each, sent in the last 30 days (the deliverability page's reading)
CREATE TEMP TABLE history AS
WITH c AS (
    INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, status,
                                  recipients_built_at, started_at, sent_at)
    SELECT s.account_id, 'Issue ' || k, 'Hello', 'news@example.com', 'b', ARRAY[s.list_id], 'sent',
           now() - make_interval(days => 7 * k), now() - make_interval(days => 7 * k),
           now() - make_interval(days => 7 * k - 1)
    FROM seeded s, generate_series(1, 3) k
    RETURNING id, account_id, started_at
)
SELECT * FROM c;
SELECT einmal.sends_partition(id) FROM history;
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, sent_at)
SELECT h.id, h.account_id, b.id, b.email, b.email_lower, 'campaign:' || h.id || ':' || b.id, 'sent',
       h.started_at + (b.id % 3600) * interval '1 second'
FROM history h JOIN einmal.subscribers b ON b.account_id = h.account_id
WHERE b.id <= (SELECT min(id) FROM einmal.subscribers WHERE account_id = h.account_id) + :history - 1;

-- bounces (1 in 200 of the history) and complaints (1 in 2,000), a day or two after their message
INSERT INTO einmal.inbound_events (event_id, payload_hash)
SELECT 'bench:' || s.id, 'x' FROM history h JOIN einmal.sends s ON s.campaign_id = h.id
WHERE s.subscriber_id % 200 = 0 OR s.subscriber_id % 2000 = 1;
INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason, counts, campaign_id, created_at)
SELECT 'bench:' || s.id, s.account_id, s.id, CASE WHEN s.subscriber_id % 200 = 0 THEN 'hard' ELSE 'complaint' END,
       '5.1.1', CASE WHEN s.subscriber_id % 200 = 0 THEN 'no_mailbox' ELSE 'complaint' END, false, s.campaign_id,
       s.sent_at + interval '1 day' + (s.subscriber_id % 86400) * interval '1 second'
FROM history h JOIN einmal.sends s ON s.campaign_id = h.id
WHERE s.subscriber_id % 200 = 0 OR s.subscriber_id % 2000 = 1;

-- a webhook endpoint with 1,000 deliveries, a tenth parked
INSERT INTO einmal.webhook_endpoints (account_id, url, events, secret)
SELECT account_id, 'https://hooks.example.org/bench', '{message.sent}', 'whsec_bench' FROM seeded;
INSERT INTO einmal.webhook_events (id, account_id, type, sequence, payload)
SELECT 'evt_bench_' || i, s.account_id, 'message.sent', i, '{}' FROM seeded s, generate_series(1, 1000) i;
INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id, state, attempts, last_status)
SELECT 'evt_bench_' || i, e.id, CASE WHEN i % 10 = 0 THEN 'parked' ELSE 'delivered' END, 1, 200
FROM einmal.webhook_endpoints e, generate_series(1, 1000) i;

-- 1,000 transactional messages, sent
CREATE TEMP TABLE made AS
SELECT nextval('einmal.message_ids') AS id, s.account_id, b.id AS subscriber_id, b.email
FROM seeded s JOIN einmal.subscribers b ON b.account_id = s.account_id ORDER BY b.id LIMIT 1000;
INSERT INTO einmal.campaigns (id, account_id, name, subject, from_address, body_text, list_ids, kind, status,
                              recipients_built_at, started_at, unsubscribe_required)
OVERRIDING SYSTEM VALUE
SELECT id, account_id, 'message', 'Your receipt', 'shop@example.com', 'b', '{}', 'message', 'sent', now(), now(), false
FROM made;
INSERT INTO einmal.messages (campaign_id, account_id, template) SELECT id, account_id, 'receipt' FROM made;
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, sent_at)
SELECT id, account_id, subscriber_id, email, email, 'campaign:' || id || ':' || subscriber_id, 'sent', now()
FROM made;

-- a list 'welcome' of the first 10,000 subscribers, for the sequence
INSERT INTO einmal.lists (account_id, name) SELECT account_id, 'welcome' FROM seeded;
INSERT INTO einmal.list_members (list_id, subscriber_id)
SELECT l.id, b.id FROM seeded s JOIN einmal.lists l ON l.account_id = s.account_id AND l.name = 'welcome'
JOIN einmal.subscribers b ON b.account_id = s.account_id ORDER BY b.id LIMIT 10000;
