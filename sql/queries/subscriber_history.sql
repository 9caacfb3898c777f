-- What einmal sent subscriber :subscriber_id in the :campaigns newest campaigns of account :account_id (campaigns,
-- messages, sequence steps), newest first: each send row found through its campaign's index
-- sends_one_per_subscriber, with its bounces' and complaints' kinds (bounces_send) and its clicks
-- (clicks_recipient). Campaigns it was not a recipient of give no row.
SELECT c.id AS campaign_id, c.name, c.kind, s.status, s.sent_at, s.updated_at,
       coalesce((SELECT array_agg(b.kind ORDER BY b.id) FROM einmal.bounces AS b WHERE b.send_id = s.id), '{}')
           AS bounces,
       (SELECT count(*) FROM einmal.clicks AS k
        WHERE k.campaign_id = c.id AND k.subscriber_id = :subscriber_id AND k.tag = 'human') AS clicks
FROM (SELECT id, name, kind FROM einmal.campaigns WHERE account_id = :account_id ORDER BY id DESC LIMIT :campaigns)
     AS c
JOIN LATERAL (SELECT id, status, sent_at, updated_at FROM einmal.sends
              WHERE campaign_id = c.id AND subscriber_id = :subscriber_id) AS s ON true
ORDER BY c.id DESC
