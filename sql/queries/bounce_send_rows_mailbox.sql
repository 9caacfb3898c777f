-- The newest send row of account :account_id to mailbox key :email_key whose message went out (sent) or may have
-- (sending, in doubt): a provider's event that does not name its message is tied to it (service/webhooks.py); a row
-- never sent (queued, claimed, failed, suppressed) cannot have bounced. One probe of sends_one_per_address
-- (campaign_id, email_lower) per campaign of the account: no index of its own on einmal.sends, whose every status
-- change would have to update it.
SELECT s.id, s.campaign_id, s.account_id, s.email, s.email_lower
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = :email_key
WHERE c.account_id = :account_id AND s.status IN ('sent', 'sending', 'in_doubt')
ORDER BY s.id DESC
LIMIT 1
