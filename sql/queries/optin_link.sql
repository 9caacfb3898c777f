-- What the confirmation page shows for the token (account :account_id, confirmation campaign :campaign_id,
-- subscriber :subscriber_id), or no row when the account is gone: the account's display name, language and contact
-- (a genuine token's page of a link that does not work offers it); the list's title (NULL: none) and the From of its
-- confirmations; the subscriber's address and the membership's state (NULL: none; 'expired': unconfirmed for longer
-- than :window_seconds seconds). `campaign_id` is NULL when the token names no confirmation campaign of the account.
SELECT a.display_name, a.language, a.contact, c.id AS campaign_id, c.from_address, l.title AS list_title, s.email,
       CASE WHEN m.state = 'unconfirmed'
                 AND m.created_at <= now() - make_interval(secs => :window_seconds) THEN 'expired'
            ELSE m.state END AS state
FROM einmal.accounts AS a
LEFT JOIN einmal.campaigns AS c ON c.id = :campaign_id AND c.account_id = a.id AND c.kind = 'confirmation'
LEFT JOIN einmal.lists AS l ON l.id = c.list_ids[1]
LEFT JOIN einmal.subscribers AS s ON s.id = :subscriber_id AND s.account_id = a.id AND s.status <> 'erased'
    AND c.id IS NOT NULL
LEFT JOIN einmal.list_members AS m ON m.list_id = l.id AND m.subscriber_id = s.id
WHERE a.id = :account_id
