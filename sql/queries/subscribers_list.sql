-- The subscribers of the account named :account (not the erased), confirmed members of list :list when it is not
-- NULL, oldest first, each with its state (einmal.subscriber_state), its lists (confirmed memberships: the
-- ones campaigns reach) and its sign-ups awaiting confirmation, each joined by '|' (as an import reads
-- them back), and the reason its mailbox key is suppressed (NULL: it is not).
SELECT s.id, s.email, s.name, einmal.subscriber_state(s.id, x.reason) AS status, s.attributes, s.created_at,
       x.reason AS suppressed,
       coalesce((SELECT string_agg(l.name, '|' ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'confirmed'), '') AS lists,
       coalesce((SELECT string_agg(l.name, '|' ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'unconfirmed'), '') AS unconfirmed
FROM einmal.subscribers AS s JOIN einmal.accounts AS a ON a.id = s.account_id
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
WHERE a.name = :account AND s.status <> 'erased'
  AND (:list::text IS NULL OR EXISTS (SELECT 1 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                                   WHERE m.subscriber_id = s.id AND l.name = :list::text AND m.state = 'confirmed'))
ORDER BY s.id
