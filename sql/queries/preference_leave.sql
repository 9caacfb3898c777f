-- Take the mailbox of account :account_id's subscriber :subscriber_id off the account's list :list_id: the
-- membership of every subscriber of the account with its mailbox key (docs/design.md#addresses). The list's name and title
-- (NULL: none) once per membership removed: no row when the mailbox was not on it, or the list is not the account's.
DELETE FROM einmal.list_members AS m
USING einmal.lists AS l, einmal.subscribers AS me, einmal.subscribers AS s
WHERE me.id = :subscriber_id AND me.account_id = :account_id AND me.status <> 'erased'
  AND l.id = :list_id AND l.account_id = :account_id
  AND s.account_id = :account_id AND s.email_lower = me.email_lower
  AND m.list_id = l.id AND m.subscriber_id = s.id
RETURNING l.name, l.title
