-- Sequences at their edges (docs/design.md#sequences): a member who rejoins gets the step that was waiting when
-- it left.
--
-- A leave settles the member's step rows not yet on the wire as 'suppressed' ('left the list') and its progress
-- keeps the step (last_position): a rejoin continued past it, so that step was never sent (a step waiting for its
-- send window when the member left, or a step 1 queued in a quick leave and rejoin). The join, restated from 0115,
-- now also queues that row again, the member's last step's, when a leave settled it: placed in the step's window as
-- it is now, and the sweep holds the next step until it is settled, as any.
--
-- (0115's comment has every delay count from joined_at: a step's delay now counts from the member's previous step's
-- send, and joined_at starts the first step only; sql/queries/sequence_sweep.sql.)
CREATE OR REPLACE FUNCTION einmal.sequence_members_join(lists bigint[], subscribers bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH back AS (
        INSERT INTO einmal.sequence_members AS m (sequence_id, subscriber_id, due_at)
        SELECT q.id, n.subscriber_id, now()
        FROM unnest(lists, subscribers) AS n (list_id, subscriber_id)
        JOIN einmal.sequences AS q ON q.list_id = n.list_id
        ON CONFLICT (sequence_id, subscriber_id) DO UPDATE SET left_at = NULL, due_at = now()
            WHERE m.left_at IS NOT NULL
        RETURNING m.subscriber_id, m.last_step
    )
    UPDATE einmal.sends AS d
    SET status = 'queued', claimed_by = NULL, last_reply = NULL, updated_at = now(),
        next_attempt_at = einmal.step_window_open(c.step_window_from, c.step_window_to, c.step_window_zone, now())
    FROM back AS b, einmal.campaigns AS c
    WHERE c.id = b.last_step AND c.kind = 'step' AND c.status IN ('sending', 'paused')
      AND d.campaign_id = b.last_step AND d.subscriber_id = b.subscriber_id
      AND d.status = 'suppressed' AND d.last_reply = 'left the list';
    PERFORM pg_notify('einmal_sequence', w.id::text)
    FROM (SELECT DISTINCT q.id FROM einmal.sequences AS q WHERE q.list_id = ANY (lists)) AS w;
END $$;
