-- The recipient an unsubscribe token names: its address and account, and the campaign's name
-- (NULL when the campaign is gone). No row when the subscriber is not the account's.
SELECT s.email, a.name AS account_name, c.name AS campaign_name
FROM einmal.subscribers AS s
JOIN einmal.accounts AS a ON a.id = s.account_id
LEFT JOIN einmal.campaigns AS c ON c.id = $3 AND c.account_id = s.account_id
WHERE s.id = $2 AND s.account_id = $1
