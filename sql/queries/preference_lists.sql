-- The lists of account :account_id that the mailbox of its subscriber :subscriber_id is on, through any of the
-- account's subscribers with that mailbox key (docs/design.md#addresses), by name, at most :limit: what the preference page
-- shows (its title: NULL when it has none; the page never shows the name, which is the operator's). None when the
-- subscriber is not the account's or was erased; never another account's list.
SELECT DISTINCT l.id, l.name, l.title
FROM einmal.subscribers AS me
JOIN einmal.subscribers AS s ON s.account_id = me.account_id AND s.email_lower = me.email_lower
                              AND s.status <> 'erased'
JOIN einmal.list_members AS m ON m.subscriber_id = s.id
JOIN einmal.lists AS l ON l.id = m.list_id AND l.account_id = me.account_id
WHERE me.id = :subscriber_id AND me.account_id = :account_id AND me.status <> 'erased'
ORDER BY l.name, l.id
LIMIT :limit
