-- The steps of sequence $1 (positions 1-3: 0 s, 3 days, 7 days) and its members' progress: $2 due now (every other
-- one of those at step 2), the rest at step 2 and due in the days to come (their step-1 rows: seed_sequence_sent)
WITH q AS (
    SELECT id, account_id, list_id FROM einmal.sequences WHERE id = $1
), steps AS (
    INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status,
                                  recipients_built_at, started_at, sequence_id, step_position, step_delay_seconds)
    SELECT q.account_id, 'step ' || p, 'Step ' || p, 'news@example.com', 'Hello {{ name }}', ARRAY[q.list_id], 'step',
           'sending', now(), now(), q.id, p, d
    FROM q, (VALUES (1, 0), (2, 259200), (3, 604800)) AS v (p, d)
    RETURNING id, step_position
), members AS (
    INSERT INTO einmal.sequence_members (sequence_id, subscriber_id, joined_at, last_position, last_step, due_at)
    SELECT $1, lm.subscriber_id,
           -- due ones: at step 2 joined 4 days ago, at step 1 joined a minute ago (the step after is days away)
           CASE WHEN n <= $2 AND n % 2 = 0 THEN now() - interval '4 days' WHEN n <= $2 THEN now() - interval '1 minute'
                ELSE now() - interval '1 day' END,
           CASE WHEN n <= $2 AND n % 2 = 0 THEN 1 WHEN n > $2 THEN 1 ELSE 0 END,
           CASE WHEN (n <= $2 AND n % 2 = 0) OR n > $2 THEN (SELECT id FROM steps WHERE step_position = 1) END,
           CASE WHEN n <= $2 THEN now() - interval '1 minute' ELSE now() + interval '2 days' END
    FROM (SELECT subscriber_id, row_number() OVER (ORDER BY subscriber_id) AS n
          FROM einmal.list_members WHERE list_id = (SELECT list_id FROM q)) AS lm
    -- the join's trigger made each member's row, due now: rewritten as the sweep would have left it
    ON CONFLICT (sequence_id, subscriber_id) DO UPDATE
        SET joined_at = EXCLUDED.joined_at, last_position = EXCLUDED.last_position, last_step = EXCLUDED.last_step,
            due_at = EXCLUDED.due_at
    RETURNING 1
)
SELECT count(*) FROM members
