-- The account of campaign :campaign_id and that account's name, or no row.
SELECT c.account_id, a.name AS account FROM einmal.campaigns AS c JOIN einmal.accounts AS a ON a.id = c.account_id
WHERE c.id = :campaign_id
