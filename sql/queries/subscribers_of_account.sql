-- The subscribers of account :account_id (not the erased), by id after :after_id, at most :limit: those whose
-- mailbox key is :email_key when it is not NULL, in state :status (einmal.subscriber_state) when it is not NULL, a
-- confirmed member of the list named :list_name when it is not NULL. Each as einmal.subscribers_shown shows it
-- (migration 0152): its lists, its sign-ups awaiting confirmation and its key's suppression.
SELECT s.id, s.email, s.name, s.status, s.attributes, s.created_at, s.lists, s.unconfirmed_lists, s.suppressed
FROM einmal.subscribers_shown AS s
WHERE s.account_id = :account_id AND s.stored_status <> 'erased' AND s.id > :after_id
  AND (:email_key::text IS NULL OR s.email_lower = :email_key::text)
  AND (:status::text IS NULL OR s.status = :status::text)
  AND (:list_name::text IS NULL OR EXISTS (SELECT 1 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                                   WHERE m.subscriber_id = s.id AND l.name = :list_name::text
                                     AND m.state = 'confirmed'))
ORDER BY s.id
LIMIT :limit
