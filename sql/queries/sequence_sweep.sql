-- The sweep's second statement, in the transaction of sequence_sweep_lock.sql, over the members :subscriber_ids of
-- running sequence :sequence_id it locked (docs/design.md#sequences), each still due. A step's delay counts from the
-- member's previous step: its row's send (sent_at; a row settled otherwise, failed or suppressed: when it settled),
-- the first step's from the join. For each, its next step (the first step not deleted past its last position) is
--   'done'  no such step, or it is no longer a confirmed member: not looked at again (due_at NULL) until a step is
--           added or it joins again;
--   'wait'  the member's row of the step before is not settled yet (queued, claimed, sending, in doubt): due again in
--           :wait_seconds, so that it does not hold the head of the queue;
--   'early' its delay after the previous step's send (the first step: after the join; a step passed over: when it
--           was) not reached: due then;
--   'pass'  a sequence narrowed by a segment whose rule does not take the member now (the predicate over `s` in place
--           of the marker below, service/segments/compiled.py; without one it stays `true`): advanced past the step
--           without a row, due again at once for the next;
--   'send'  its send row queued (ON CONFLICT DO NOTHING: P1 keeps one per step and mailbox), not before the step's
--           send window opens, and the member advanced to it, due no earlier than the step after it can be (the
--           row's first attempt and that step's delay).
-- One statement: a crash leaves the row queued and the member advanced, or neither. The steps that queued a row wake
-- the nodes. One row: members looked at, rows queued.
WITH due AS MATERIALIZED (
    SELECT m.subscriber_id, m.joined_at, m.last_position, m.last_step, m.passed_at
    FROM einmal.sequence_members AS m
    WHERE m.sequence_id = :sequence_id AND m.subscriber_id = ANY (:subscriber_ids::bigint[]) AND m.due_at <= now()
), plan AS MATERIALIZED (
    SELECT d.subscriber_id, nxt.id AS step, nxt.account_id, nxt.step_position,
           nxt.step_delay_seconds, after.step_delay_seconds AS after_delay, s.email, s.email_lower,
           einmal.step_window_open(
               nxt.step_window_from, nxt.step_window_to,
               -- 'local': the member's own zone, else the account's (migration 0146)
               CASE WHEN nxt.step_window_zone <> 'local' THEN nxt.step_window_zone
                    WHEN s.attributes ->> 'time_zone' IN (SELECT z.name FROM pg_timezone_names AS z)
                        THEN s.attributes ->> 'time_zone'
                    ELSE (SELECT a.time_zone FROM einmal.accounts AS a WHERE a.id = nxt.account_id) END,
               now()) AS open_at,
           (/* segment */ true) AS chosen,
           (s.status <> 'erased' AND EXISTS (
                SELECT 1 FROM einmal.sequences AS q
                JOIN einmal.list_members AS lm ON lm.list_id = q.list_id
                WHERE q.id = :sequence_id AND lm.subscriber_id = d.subscriber_id AND lm.state = 'confirmed')) AS member,
           prev.status AS previous,
           CASE WHEN d.passed_at IS NOT NULL THEN d.passed_at
                WHEN d.last_step IS NULL THEN d.joined_at ELSE coalesce(prev.at, d.joined_at) END AS since
    FROM due AS d
    JOIN einmal.subscribers AS s ON s.id = d.subscriber_id
    LEFT JOIN LATERAL (
        SELECT p.status, coalesce(p.sent_at, p.updated_at) AS at FROM einmal.sends AS p
        WHERE p.campaign_id = d.last_step AND p.subscriber_id = d.subscriber_id
    ) AS prev ON true
    LEFT JOIN LATERAL (
        SELECT c.id, c.account_id, c.step_position, c.step_delay_seconds, c.step_window_from, c.step_window_to,
               c.step_window_zone
        FROM einmal.campaigns AS c
        WHERE c.sequence_id = :sequence_id AND c.kind = 'step' AND c.status IN ('sending', 'paused')
          AND c.step_position > d.last_position
        ORDER BY c.step_position LIMIT 1
    ) AS nxt ON true
    LEFT JOIN LATERAL (
        SELECT c.step_delay_seconds
        FROM einmal.campaigns AS c
        WHERE c.sequence_id = :sequence_id AND c.kind = 'step' AND c.status IN ('sending', 'paused')
          AND c.step_position > nxt.step_position
        ORDER BY c.step_position LIMIT 1
    ) AS after ON true
), decided AS MATERIALIZED (
    SELECT p.*,
           CASE WHEN p.step IS NULL OR NOT p.member THEN 'done'
                WHEN p.previous IN ('queued', 'claimed', 'sending', 'in_doubt') THEN 'wait'
                WHEN p.since + make_interval(secs => p.step_delay_seconds) > now() THEN 'early'
                WHEN NOT p.chosen THEN 'pass'
                ELSE 'send' END AS verdict
    FROM plan AS p
), queued AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, next_attempt_at)
    SELECT d.step, d.account_id, d.subscriber_id, d.email, d.email_lower, 'campaign:' || d.step || ':' || d.subscriber_id,
           d.open_at
    FROM decided AS d WHERE d.verdict = 'send'
    ON CONFLICT DO NOTHING
    RETURNING campaign_id
), moved AS (
    UPDATE einmal.sequence_members AS m SET
        last_position = CASE WHEN d.verdict IN ('send', 'pass') THEN d.step_position ELSE m.last_position END,
        last_step = CASE WHEN d.verdict = 'send' THEN d.step ELSE m.last_step END,
        passed_at = CASE d.verdict WHEN 'send' THEN NULL WHEN 'pass' THEN now() ELSE m.passed_at END,
        due_at = CASE d.verdict
                     WHEN 'done' THEN NULL
                     WHEN 'early' THEN d.since + make_interval(secs => d.step_delay_seconds)
                     WHEN 'wait' THEN now() + make_interval(secs => :wait_seconds)
                     WHEN 'pass' THEN now()
                     ELSE d.open_at + make_interval(secs => d.after_delay) END
    FROM decided AS d
    WHERE m.sequence_id = :sequence_id AND m.subscriber_id = d.subscriber_id
    RETURNING d.verdict
)
SELECT (SELECT count(*) FROM moved) AS looked,
       (SELECT count(*) FROM moved WHERE verdict = 'send') AS queued,
       (SELECT count(pg_notify('einmal_queued', w.campaign_id::text))
        FROM (SELECT DISTINCT q.campaign_id FROM queued AS q) AS w) AS woke
