-- Campaigns, newest first, all or those in status $1; with their account and send-row total.
SELECT c.id, a.name AS account, c.name, c.status, c.scheduled_for, c.pause_reason,
       (SELECT count(*) FROM einmal.sends s WHERE s.campaign_id = c.id) AS recipients
FROM einmal.campaigns AS c JOIN einmal.accounts AS a ON a.id = c.account_id
WHERE $1::text IS NULL OR c.status = $1::text
ORDER BY c.id DESC
