-- Sequences (docs/design.md#sequences): mail that follows each member of a list from the day its membership is
-- confirmed. A step is a campaign of kind 'step' (its own partition of einmal.sends, so UNIQUE (campaign_id,
-- subscriber_id) and (campaign_id, email_lower) give one row per (step, mailbox)), 'sending' while its sequence runs
-- and never finished (campaign_finish.sql takes kind 'campaign' only), built from the start (recipients_built_at
-- set: no recipient build runs). Each member's progress is a row of einmal.sequence_members, which the sweep
-- (actors/sequencer.py) advances one step at a time in the transaction that queues the step's send row.
CREATE TABLE einmal.sequences (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    list_id     bigint NOT NULL REFERENCES einmal.lists (id),
    name        text NOT NULL,
    status      text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'paused')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);
CREATE INDEX sequences_list ON einmal.sequences (list_id);

-- a step: its sequence, its position (never reused in its sequence, a deleted step's included, so a member's last
-- position names one step), its delay after the member's confirmed join, and an optional send window: hours
-- [from, to) in a time zone, wrapping past midnight when from > to
ALTER TABLE einmal.campaigns
    ADD COLUMN sequence_id bigint REFERENCES einmal.sequences (id),
    ADD COLUMN step_position integer,
    ADD COLUMN step_delay_seconds bigint,
    ADD COLUMN step_window_from smallint,
    ADD COLUMN step_window_to smallint,
    ADD COLUMN step_window_zone text;
ALTER TABLE einmal.campaigns DROP CONSTRAINT campaigns_kind;
-- checked here rather than NOT VALID: one row per campaign and per transactional message (0114), a scan of a
-- narrow table; the kinds are 0114's and 'step'
ALTER TABLE einmal.campaigns
    ADD CONSTRAINT campaigns_kind CHECK (kind IN ('campaign', 'confirmation', 'message', 'step')),
    ADD CONSTRAINT campaigns_step CHECK (
        (kind = 'step') = (sequence_id IS NOT NULL AND step_position IS NOT NULL AND step_delay_seconds IS NOT NULL)
        AND (step_position IS NULL OR step_position >= 1)
        AND (step_delay_seconds IS NULL OR step_delay_seconds >= 0)
        AND (step_window_from IS NULL) = (step_window_to IS NULL)
        AND (step_window_from IS NULL) = (step_window_zone IS NULL)
        AND (step_window_from IS NULL OR (step_window_from BETWEEN 0 AND 23 AND step_window_to BETWEEN 0 AND 23
                                          AND step_window_from <> step_window_to)));
CREATE UNIQUE INDEX campaigns_step_position ON einmal.campaigns (sequence_id, step_position) WHERE kind = 'step';

-- A member's progress. last_position: the position of the step whose send row was queued for it last (0: none yet),
-- last_step that step's campaign; due_at: when the sweep looks at it next (NULL: nothing to do — it left the list,
-- or it is past the last step); joined_at: its confirmed join, from which every delay counts.
CREATE TABLE einmal.sequence_members (
    sequence_id   bigint NOT NULL REFERENCES einmal.sequences (id),
    subscriber_id bigint NOT NULL REFERENCES einmal.subscribers (id),
    joined_at     timestamptz NOT NULL DEFAULT now(),
    last_position integer NOT NULL DEFAULT 0,
    last_step     bigint REFERENCES einmal.campaigns (id),
    due_at        timestamptz,
    left_at       timestamptz,
    PRIMARY KEY (sequence_id, subscriber_id)
);
-- the sweep's walk: a sequence's members due first (paused sequences are not walked)
CREATE INDEX sequence_members_due ON einmal.sequence_members (sequence_id, due_at) WHERE due_at IS NOT NULL;
-- erasure, and a leave
CREATE INDEX sequence_members_subscriber ON einmal.sequence_members (subscriber_id);

-- When a step's row may go out: `at` inside the window [from_hour, to_hour) of zone, else the window's next opening
-- (NULL window: at). Local time, so a change of daylight saving time moves the opening with the clock.
CREATE FUNCTION einmal.step_window_open(from_hour smallint, to_hour smallint, zone text, at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN from_hour IS NULL THEN at
        WHEN (from_hour < to_hour AND h >= from_hour AND h < to_hour)
          OR (from_hour > to_hour AND (h >= from_hour OR h < to_hour)) THEN at
        ELSE (date_trunc('day', l) + make_interval(hours => from_hour)
              + CASE WHEN h >= from_hour THEN interval '1 day' ELSE interval '0' END) AT TIME ZONE zone
    END
    FROM (SELECT at AT TIME ZONE zone AS l, extract(hour FROM at AT TIME ZONE zone)::integer AS h) AS local
$$;

-- Joining and leaving, whatever path writes the membership (the import, the API, a confirmation, the preference
-- page, erasure, the pruner). Statement-level triggers with transition tables: an import of a million members
-- costs one statement here, not a million calls.
--
-- A membership that becomes confirmed (inserted confirmed, or confirmed from unconfirmed: a sign-up awaiting its
-- confirmation is no member) makes the member's row, due now, and wakes the sweeps (one notification per sequence
-- and transaction: PostgreSQL folds equal ones). A member who left and is confirmed again continues where it
-- stopped: its row is kept, joined_at too (no restart).
CREATE FUNCTION einmal.sequence_members_join(lists bigint[], subscribers bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO einmal.sequence_members AS m (sequence_id, subscriber_id, due_at)
    SELECT q.id, n.subscriber_id, now()
    FROM unnest(lists, subscribers) AS n (list_id, subscriber_id)
    JOIN einmal.sequences AS q ON q.list_id = n.list_id
    ON CONFLICT (sequence_id, subscriber_id) DO UPDATE SET left_at = NULL, due_at = now()
        WHERE m.left_at IS NOT NULL;
    PERFORM pg_notify('einmal_sequence', w.id::text)
    FROM (SELECT DISTINCT q.id FROM einmal.sequences AS q WHERE q.list_id = ANY (lists)) AS w;
END $$;

CREATE FUNCTION einmal.sequence_members_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lists bigint[];
    subscribers bigint[];
BEGIN
    SELECT array_agg(n.list_id), array_agg(n.subscriber_id) INTO lists, subscribers
    FROM joined AS n
    WHERE n.state = 'confirmed' AND EXISTS (SELECT 1 FROM einmal.sequences AS q WHERE q.list_id = n.list_id);
    IF lists IS NOT NULL THEN
        PERFORM einmal.sequence_members_join(lists, subscribers);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION einmal.sequence_members_confirmed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lists bigint[];
    subscribers bigint[];
BEGIN
    SELECT array_agg(n.list_id), array_agg(n.subscriber_id) INTO lists, subscribers
    FROM joined AS n JOIN was AS o ON o.list_id = n.list_id AND o.subscriber_id = n.subscriber_id
    WHERE n.state = 'confirmed' AND o.state <> 'confirmed'
      AND EXISTS (SELECT 1 FROM einmal.sequences AS q WHERE q.list_id = n.list_id);
    IF lists IS NOT NULL THEN
        PERFORM einmal.sequence_members_join(lists, subscribers);
    END IF;
    RETURN NULL;
END $$;

-- A membership deleted stops the member: marked left (no later step is queued), then, in a statement of its own,
-- its step rows not yet on the wire (queued, or claimed and not started) settled as 'suppressed' with the reply
-- 'left the list'. The first statement locks the member's row: a sweep holding it commits first, and the second
-- statement, with a snapshot taken after, sees the row that sweep queued.
CREATE FUNCTION einmal.sequence_members_left() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM gone AS g JOIN einmal.sequences AS q ON q.list_id = g.list_id) THEN
        RETURN NULL;
    END IF;
    UPDATE einmal.sequence_members AS m SET left_at = now(), due_at = NULL
    FROM gone AS g, einmal.sequences AS q
    WHERE q.list_id = g.list_id AND m.sequence_id = q.id AND m.subscriber_id = g.subscriber_id
      AND m.left_at IS NULL;
    UPDATE einmal.sends AS d
    SET status = 'suppressed', claimed_by = NULL, last_reply = 'left the list', updated_at = now()
    FROM gone AS g, einmal.sequences AS q, einmal.campaigns AS c
    WHERE q.list_id = g.list_id AND c.sequence_id = q.id AND c.kind = 'step'
      AND d.campaign_id = c.id AND d.subscriber_id = g.subscriber_id AND d.status IN ('queued', 'claimed');
    RETURN NULL;
END $$;

CREATE TRIGGER list_members_sequences_insert AFTER INSERT ON einmal.list_members
    REFERENCING NEW TABLE AS joined FOR EACH STATEMENT EXECUTE FUNCTION einmal.sequence_members_inserted();
CREATE TRIGGER list_members_sequences_update AFTER UPDATE ON einmal.list_members
    REFERENCING OLD TABLE AS was NEW TABLE AS joined FOR EACH STATEMENT EXECUTE FUNCTION einmal.sequence_members_confirmed();
CREATE TRIGGER list_members_sequences_delete AFTER DELETE ON einmal.list_members
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION einmal.sequence_members_left();

-- Webhooks (0112): a step's message sent is `sequence.step_sent` (its sequence and position); one that failed
-- is `message.failed`, with them too. The trigger of 0112 takes step campaigns' rows beside campaigns' and
-- messages'; otherwise it is unchanged.
ALTER TABLE einmal.webhook_endpoints DROP CONSTRAINT webhook_endpoints_events_check;
ALTER TABLE einmal.webhook_endpoints ADD CONSTRAINT webhook_endpoints_events_check
    CHECK (cardinality(events) > 0 AND events <@ ARRAY[
        'message.sent', 'message.failed', 'message.bounced', 'message.complained',
        'subscriber.unsubscribed', 'subscriber.confirmed', 'sequence.step_sent']);
CREATE OR REPLACE FUNCTION einmal.webhook_sends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(n.account_id,
                   CASE WHEN c.kind = 'step' AND n.status = 'sent' THEN 'sequence.step_sent'
                        ELSE 'message.' || n.status END,
                   n.email_lower,
                   jsonb_build_object('campaign_id', n.campaign_id, 'subscriber_id', n.subscriber_id,
                                      'email', n.email, 'status', n.status, 'at', n.updated_at)
                   || CASE WHEN n.status = 'failed' THEN jsonb_build_object('reply', n.last_reply)
                           ELSE '{}'::jsonb END
                   || CASE WHEN c.kind = 'message' THEN jsonb_build_object('message_id', n.campaign_id)
                           WHEN c.kind = 'step' THEN jsonb_build_object('sequence_id', c.sequence_id,
                                                                        'position', c.step_position)
                           ELSE '{}'::jsonb END)::einmal.webhook_new_event
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id AND o.campaign_id = n.campaign_id
        JOIN einmal.campaigns c ON c.id = n.campaign_id AND c.kind IN ('campaign', 'message', 'step')
        WHERE n.status IN ('sent', 'failed') AND o.status IS DISTINCT FROM n.status
          AND EXISTS (SELECT 1 FROM einmal.webhook_endpoints w WHERE w.account_id = n.account_id AND w.disabled_at IS NULL)
        ORDER BY n.id));
    RETURN NULL;
END $$;
