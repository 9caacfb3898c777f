-- One subscriber per mailbox key and account (service/addresses.py): add the staged keys account :account_id has
-- no subscriber for (the spelling and name of the key's first row in the file), and merge the staged
-- attributes into the subscriber of each key, existing (its oldest, not erased) or new: a key the file has
-- takes the file's value (a later row of one mailbox over an earlier one), a key it lacks keeps the stored
-- value. Returns how many subscribers were added, how many existing ones had their attributes changed,
-- and how many existing ones the file names in another spelling. A row that only leaves lists (state 'left')
-- makes and changes no subscriber.
WITH staged AS (
    SELECT DISTINCT ON (email_key) line, email, email_key, name FROM pg_temp.einmal_import
    WHERE state <> 'left' ORDER BY email_key, line
), merged AS (
    SELECT i.email_key, jsonb_object_agg(a.key, a.value ORDER BY i.line) AS attributes
    FROM pg_temp.einmal_import AS i, jsonb_each(i.attributes) AS a
    WHERE i.state <> 'left'
    GROUP BY i.email_key
), existing AS (
    SELECT DISTINCT ON (s.email_lower) s.id, s.email, s.email_lower
    FROM staged AS st JOIN einmal.subscribers AS s ON s.account_id = :account_id::bigint
        AND s.email_lower = st.email_key
    WHERE s.status <> 'erased'
    ORDER BY s.email_lower, s.created_at, s.id
), updated AS (
    UPDATE einmal.subscribers AS s SET attributes = s.attributes || m.attributes
    FROM existing AS e JOIN merged AS m ON m.email_key = e.email_lower
    WHERE s.id = e.id AND NOT s.attributes @> m.attributes
    RETURNING s.id
), inserted AS (
    INSERT INTO einmal.subscribers AS s (account_id, email, email_lower, name, attributes)
    SELECT :account_id::bigint, st.email, st.email_key, st.name, coalesce(m.attributes, '{}')
    FROM staged AS st LEFT JOIN merged AS m USING (email_key)
    WHERE NOT EXISTS (SELECT 1 FROM existing AS e WHERE e.email_lower = st.email_key)
    ORDER BY st.line
    ON CONFLICT (account_id, email) DO NOTHING
    RETURNING s.id
)
SELECT (SELECT count(*) FROM inserted) AS added, (SELECT count(*) FROM updated) AS changed,
       (SELECT count(*) FROM existing AS e
        WHERE NOT EXISTS (SELECT 1 FROM pg_temp.einmal_import AS i WHERE i.email = e.email AND i.state <> 'left'))
       AS respelled
