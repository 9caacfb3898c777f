-- The staged rows that name no list (unnamed: put on `default` for want of one) of a mailbox account :account_id
-- has a subscriber for, or that an earlier row of the file named, join no list: a file without lists changes what
-- it has columns for, not the lists of the subscribers already there, and a row repeating a mailbox adds no
-- `default` to the lists its earlier row chose. Returns how many mailboxes the account had a subscriber for.
WITH kept AS (
    UPDATE pg_temp.einmal_import AS i SET list_name = NULL
    WHERE i.unnamed AND i.list_name IS NOT NULL
      AND (EXISTS (SELECT 1 FROM einmal.subscribers AS s
                   WHERE s.account_id = :account_id::bigint AND s.email_lower = i.email_key AND s.status <> 'erased')
           OR EXISTS (SELECT 1 FROM pg_temp.einmal_import_seen AS e WHERE e.email_key = i.email_key AND e.line < i.line))
    RETURNING i.email_key,
              EXISTS (SELECT 1 FROM einmal.subscribers AS s
                      WHERE s.account_id = :account_id::bigint AND s.email_lower = i.email_key
                        AND s.status <> 'erased') AS present
)
SELECT count(DISTINCT email_key) FILTER (WHERE present) FROM kept
