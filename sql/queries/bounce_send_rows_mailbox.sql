-- The newest send row to mailbox key $1 in each account (only account $2 when it is not NULL):
-- a provider's event that does not name its message is tied to it (service/webhooks.py).
-- One probe of sends_one_per_address (campaign_id, email_lower) per campaign: no index of its own
-- on einmal.sends, whose every status change would have to update it.
SELECT DISTINCT ON (s.account_id) s.id, s.account_id, s.email, s.email_lower
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = $1
WHERE $2::bigint IS NULL OR c.account_id = $2
ORDER BY s.account_id, s.id DESC
