-- The send rows of every sending campaign, counted per state (for /metrics).
SELECT s.campaign_id, s.status, count(*) AS n
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id
WHERE c.status = 'sending'
GROUP BY s.campaign_id, s.status
