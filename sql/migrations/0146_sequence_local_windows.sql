-- A step's send window in each member's own time zone (docs/design.md#sequences): the zone 'local' stands for the
-- subscriber's `time_zone` attribute when PostgreSQL knows it by that name (pg_timezone_names), else the account's
-- (migration 0145), as for a campaign's local send time. The sweep (sql/queries/sequence_sweep.sql), a window's
-- change (sequence_step_window_moved.sql) and the join that queues again the step a leave stopped (restated from
-- 0123 here) each read the zone so, in the statement that places the row; pg_timezone_names is read only by a
-- statement that meets a step with the zone 'local', once.
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
        next_attempt_at = einmal.step_window_open(
            c.step_window_from, c.step_window_to,
            CASE WHEN c.step_window_zone <> 'local' THEN c.step_window_zone
                 WHEN sub.attributes ->> 'time_zone' IN (SELECT z.name FROM pg_timezone_names AS z)
                     THEN sub.attributes ->> 'time_zone'
                 ELSE (SELECT a.time_zone FROM einmal.accounts AS a WHERE a.id = c.account_id) END,
            now())
    FROM back AS b, einmal.campaigns AS c, einmal.subscribers AS sub
    WHERE c.id = b.last_step AND c.kind = 'step' AND c.status IN ('sending', 'paused')
      AND d.campaign_id = b.last_step AND d.subscriber_id = b.subscriber_id AND sub.id = b.subscriber_id
      AND d.status = 'suppressed' AND d.last_reply = 'left the list';
    PERFORM pg_notify('einmal_sequence', w.id::text)
    FROM (SELECT DISTINCT q.id FROM einmal.sequences AS q WHERE q.list_id = ANY (lists)) AS w;
END $$;
