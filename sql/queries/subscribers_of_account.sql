-- The subscribers of account :account_id (not the erased), by id after :after_id, at most :limit: those whose
-- mailbox key is :email_key when it is not NULL, in state :status (einmal.subscriber_state) when it is not NULL, a
-- confirmed member of the list named :list_name when it is not NULL. Each with its lists (confirmed memberships: the
-- ones campaigns reach), its sign-ups awaiting confirmation (unconfirmed ones, double opt-in) and its key's
-- suppression.
SELECT s.id, s.email, s.name, einmal.subscriber_state(s.id, x.reason) AS status, s.attributes, s.created_at,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'confirmed'), '{}') AS lists,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'unconfirmed'), '{}') AS unconfirmed_lists,
       x.reason AS suppressed
FROM einmal.subscribers AS s
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower
WHERE s.account_id = :account_id AND s.status <> 'erased' AND s.id > :after_id
  AND (:email_key::text IS NULL OR s.email_lower = :email_key::text)
  AND (:status::text IS NULL OR einmal.subscriber_state(s.id, x.reason) = :status::text)
  AND (:list_name::text IS NULL OR EXISTS (SELECT 1 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                                   WHERE m.subscriber_id = s.id AND l.name = :list_name::text
                                     AND m.state = 'confirmed'))
ORDER BY s.id
LIMIT :limit
