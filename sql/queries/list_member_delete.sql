-- Take every subscriber of account $1 with mailbox key $3 off its list named $2; the memberships removed.
DELETE FROM einmal.list_members AS m
USING einmal.lists AS l, einmal.subscribers AS s
WHERE m.list_id = l.id AND m.subscriber_id = s.id AND l.account_id = $1 AND l.name = $2
  AND s.account_id = $1 AND s.email_lower = $3
RETURNING m.subscriber_id
