-- Take the mailbox of account :account_id's subscriber :subscriber_id off the account's list :list_id: the
-- membership of every subscriber of the account with its mailbox key (docs/design.md#addresses), and keep the
-- departure (einmal.list_departures, migration 0132), so that no import puts the mailbox back. The list's name and
-- title (NULL: none) once per membership removed: no row when the mailbox was not on it, or the list is not the
-- account's.
WITH gone AS (
    DELETE FROM einmal.list_members AS m
    USING einmal.lists AS l, einmal.subscribers AS me, einmal.subscribers AS s
    WHERE me.id = :subscriber_id AND me.account_id = :account_id AND me.status <> 'erased'
      AND l.id = :list_id AND l.account_id = :account_id
      AND s.account_id = :account_id AND s.email_lower = me.email_lower
      AND m.list_id = l.id AND m.subscriber_id = s.id
    RETURNING l.id, l.name, l.title, me.email_lower
), kept AS (
    INSERT INTO einmal.list_departures (list_id, email_lower)
    SELECT DISTINCT id, email_lower FROM gone
    ON CONFLICT (list_id, email_lower) DO UPDATE SET left_at = now()
)
SELECT name, title FROM gone
