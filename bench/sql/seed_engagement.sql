-- The engagement of campaign $1 (seed_campaign.sql's, $2 subscribers) as a sent campaign leaves it: a send row each,
-- its deliveries in campaign_tallies over 20 writers' tokens, 1 % hard bounces recorded as the inbound path records
-- them (einmal.bounces, its trigger counting them), 5 % of the recipients clicking (half a person's, half a
-- machine's), 20 % opening (one in eight a mail client's proxy), each recipient's last delivery; and a template's counts as 200 writers' tokens left them. The count
-- of send rows.
WITH c AS (
    UPDATE einmal.campaigns SET status = 'sent', track_clicks = true, track_opens = true, started_at = now(), sent_at = now()
    WHERE id = $1 RETURNING id, account_id
), sends AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, sent_at)
    SELECT c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id,
           CASE WHEN s.id % 100 = 0 THEN 'failed' ELSE 'sent' END, now()
    FROM c JOIN einmal.subscribers AS s ON s.account_id = c.account_id
    RETURNING id, subscriber_id, account_id, status
), tallies AS (
    INSERT INTO einmal.campaign_tallies (campaign_id, source, delivered)
    SELECT $1, 'token-' || t, count(*) FILTER (WHERE x.status = 'sent')
    FROM sends AS x, generate_series(0, 19) AS t WHERE x.subscriber_id % 20 = t GROUP BY t
), clicked AS (
    INSERT INTO einmal.clicks (id, account_id, campaign_id, subscriber_id, link, url, at, tag, reasons)
    SELECT 'clk_' || x.subscriber_id, x.account_id, $1, x.subscriber_id, 1 + x.subscriber_id % 2,
           'https://example.org/' || (1 + x.subscriber_id % 2), now(),
           CASE WHEN x.subscriber_id % 40 = 0 THEN 'machine' ELSE 'human' END,
           CASE WHEN x.subscriber_id % 40 = 0 THEN ARRAY['scanner'] ELSE '{}' END
    FROM sends AS x WHERE x.subscriber_id % 20 = 0 AND x.status = 'sent'
), opened AS (
    INSERT INTO einmal.opens (id, account_id, campaign_id, subscriber_id, at, tag, reasons)
    SELECT 'opn_' || x.subscriber_id, x.account_id, $1, x.subscriber_id, now(),
           CASE WHEN x.subscriber_id % 40 = 0 THEN 'machine' ELSE 'human' END,
           CASE WHEN x.subscriber_id % 40 = 0 THEN ARRAY['proxy'] ELSE '{}' END
    FROM sends AS x WHERE x.subscriber_id % 5 = 0 AND x.status = 'sent'
), delivered AS (
    INSERT INTO einmal.subscriber_deliveries (subscriber_id, at)
    SELECT x.subscriber_id, now() FROM sends AS x WHERE x.status = 'sent'
), templates AS (
    INSERT INTO einmal.engagement (account_id, subject, source, delivered, rejected)
    SELECT (SELECT account_id FROM c), 'template:receipt', 'token-' || t, $2 / 200, $2 / 20000
    FROM generate_series(1, 200) AS t
)
SELECT count(*) FROM sends
