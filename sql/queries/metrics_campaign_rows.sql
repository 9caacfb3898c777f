-- The send rows of every sending campaign, counted per state (for /metrics).
SELECT s.campaign_id, s.status, count(*) AS n
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id
WHERE c.status = 'sending' AND c.kind <> 'message'  -- messages: einmal_messages (metrics_messages.sql)
GROUP BY s.campaign_id, s.status
