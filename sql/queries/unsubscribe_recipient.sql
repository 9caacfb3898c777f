-- The recipient an unsubscribe token names ($1 account, $2 campaign, $3 subscriber): its address,
-- its account's name and the campaign's (NULL when the campaign is gone or not the account's).
-- No row when the subscriber is not the account's, or was erased (its old links name nobody).
SELECT s.email, a.name AS account_name, c.name AS campaign_name
FROM einmal.subscribers AS s
JOIN einmal.accounts AS a ON a.id = s.account_id
LEFT JOIN einmal.campaigns AS c ON c.id = $2 AND c.account_id = s.account_id
WHERE s.account_id = $1 AND s.id = $3 AND s.status <> 'erased'
