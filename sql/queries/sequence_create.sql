-- A new sequence :sequence_name of account :account_id on its list :list_id, running; with :existing, the list's
-- confirmed members now are its members from now on (joined now); narrowed by segment :segment, whose rule
-- :segment_rule it keeps as it is now (both NULL: none). No row: the account has a sequence of that name.
WITH made AS (
    INSERT INTO einmal.sequences (account_id, list_id, name, segment, segment_rule)
    SELECT :account_id, l.id, :sequence_name, :segment, :segment_rule::jsonb
    FROM einmal.lists AS l WHERE l.id = :list_id AND l.account_id = :account_id
    ON CONFLICT (account_id, name) DO NOTHING
    RETURNING id, list_id
), members AS (
    INSERT INTO einmal.sequence_members (sequence_id, subscriber_id, due_at)
    SELECT made.id, lm.subscriber_id, now() FROM made
    JOIN einmal.list_members AS lm ON lm.list_id = made.list_id AND lm.state = 'confirmed'
    WHERE :existing::boolean
    RETURNING 1
)
SELECT id, (SELECT count(*) FROM members) AS members FROM made
