-- The newest send row to mailbox key $1 in each account (only account $2 when it is not NULL):
-- a provider's event that does not name its message is tied to it (service/webhooks.py).
SELECT DISTINCT ON (account_id) id, account_id, email, email_lower
FROM einmal.sends
WHERE email_lower = $1 AND ($2::bigint IS NULL OR account_id = $2)
ORDER BY account_id, id DESC
