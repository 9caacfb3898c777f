-- What the confirmation page shows for the token (account $1, confirmation campaign $2, subscriber $3): the
-- list's name, the account's display name, name and language, the subscriber's address and the membership's
-- state (NULL: none; 'expired': unconfirmed for longer than $4 seconds). No row: the token names no list.
SELECT l.name AS list_name, a.display_name, a.name AS account_name, a.language, s.email,
       CASE WHEN m.state = 'unconfirmed' AND m.created_at <= now() - make_interval(secs => $4) THEN 'expired'
            ELSE m.state END AS state
FROM einmal.campaigns AS c
JOIN einmal.lists AS l ON l.id = c.list_ids[1]
JOIN einmal.accounts AS a ON a.id = c.account_id
LEFT JOIN einmal.subscribers AS s ON s.id = $3 AND s.account_id = c.account_id AND s.status <> 'erased'
LEFT JOIN einmal.list_members AS m ON m.list_id = l.id AND m.subscriber_id = s.id
WHERE c.id = $2 AND c.account_id = $1 AND c.kind = 'confirmation'
