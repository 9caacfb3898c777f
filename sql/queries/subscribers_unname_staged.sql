-- The staged rows that name no list (unnamed: put on `default` for want of one) of a mailbox account :account_id
-- has a subscriber for join no list: a file without lists changes what it has columns for, not the lists of the
-- subscribers already there. Returns how many mailboxes.
WITH kept AS (
    UPDATE pg_temp.einmal_import AS i SET list_name = NULL
    WHERE i.unnamed AND i.list_name IS NOT NULL
      AND EXISTS (SELECT 1 FROM einmal.subscribers AS s
                  WHERE s.account_id = :account_id::bigint AND s.email_lower = i.email_key AND s.status <> 'erased')
    RETURNING i.email_key
)
SELECT count(DISTINCT email_key) FROM kept
