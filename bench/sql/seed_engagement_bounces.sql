-- 1 % of campaign $1's send rows hard-bounced, recorded as the inbound path records them: an inbound event and a
-- bounce each, in one statement each (the bounces' trigger counts them for the campaign and its subscribers)
WITH events AS (
    INSERT INTO einmal.inbound_events (event_id, payload_hash)
    SELECT 'bench:' || s.id, 'x' FROM einmal.sends AS s WHERE s.campaign_id = $1 AND s.subscriber_id % 100 = 1
    RETURNING event_id
)
INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, campaign_id)
SELECT e.event_id, s.account_id, s.id, 'hard', '5.1.1', s.campaign_id
FROM events AS e JOIN einmal.sends AS s ON s.campaign_id = $1 AND s.id = substr(e.event_id, 7)::bigint
