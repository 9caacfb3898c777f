-- Take every subscriber of account :account_id with mailbox key :email_key off its list named :list_name; the
-- memberships removed.
DELETE FROM einmal.list_members AS m
USING einmal.lists AS l, einmal.subscribers AS s
WHERE m.list_id = l.id AND m.subscriber_id = s.id AND l.account_id = :account_id AND l.name = :list_name
  AND s.account_id = :account_id AND s.email_lower = :email_key
RETURNING m.subscriber_id
