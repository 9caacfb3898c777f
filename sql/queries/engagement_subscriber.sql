-- Subscriber :subscriber_id's last activity (service/engagement): its last delivery (einmal.subscriber_deliveries,
-- written by the writer), bounce, complaint and one-click unsubscribe (einmal.subscriber_activity), and its last
-- click, a person's and any (einmal.clicks, by its index on subscriber_id). One row; NULL where none.
SELECT (SELECT d.at FROM einmal.subscriber_deliveries AS d WHERE d.subscriber_id = :subscriber_id) AS delivered,
       a.bounced_at AS bounced, a.complained_at AS complained, a.unsubscribed_at AS unsubscribed,
       k.human AS clicked, k.any AS clicked_any
FROM (SELECT 1) AS one
LEFT JOIN einmal.subscriber_activity AS a ON a.subscriber_id = :subscriber_id
LEFT JOIN LATERAL (
    SELECT max(c.at) FILTER (WHERE c.tag = 'human') AS human, max(c.at) AS any
    FROM einmal.clicks AS c WHERE c.subscriber_id = :subscriber_id
) AS k ON true
