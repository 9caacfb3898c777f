-- The sending budget every node shares (docs/design.md §13): a cluster-wide rate, as a schedule of
-- send slots, and sliding-window quotas, kept where every node's claim already goes.

-- The next free send slot of the cluster: slots are 1/rate apart, each claimed row takes one, so however
-- many nodes claim, the messages of any second are at most rate (+1). A node that dies wastes the slots it
-- took, no more than the claim horizon (einmal.send_claim) ahead.
CREATE TABLE einmal.send_pace (
    scope     text PRIMARY KEY,
    next_slot timestamptz NOT NULL
);
INSERT INTO einmal.send_pace (scope, next_slot) VALUES ('all', '-infinity');

-- Rows claimed under a quota, counted per bucket of 1/60 of the window. A window's use is the sum of
-- its buckets that end after (now - window): a row is counted for at least its window, never less.
CREATE TABLE einmal.send_quota (
    win    text NOT NULL CHECK (win IN ('hour', 'day')),
    bucket timestamptz NOT NULL,
    width  interval NOT NULL,
    n      integer NOT NULL,
    PRIMARY KEY (win, bucket)
);

CREATE FUNCTION einmal.quota_used(p_win text, p_window float8) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(n), 0) FROM einmal.send_quota
    WHERE win = p_win AND bucket + width > clock_timestamp() - make_interval(secs => p_window)
$$;

CREATE FUNCTION einmal.quota_charge(p_win text, p_window float8, p_n integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    w float8 := p_window / 60;
    now_s float8 := extract(epoch FROM clock_timestamp());
BEGIN
    INSERT INTO einmal.send_quota (win, bucket, width, n)
    VALUES (p_win, to_timestamp(floor(now_s / w) * w), make_interval(secs => w), p_n)
    ON CONFLICT (win, bucket) DO UPDATE SET n = einmal.send_quota.n + EXCLUDED.n;
    DELETE FROM einmal.send_quota
    WHERE win = p_win AND bucket + width < clock_timestamp() - make_interval(secs => 2 * p_window);
END
$$;

-- Claim up to p_batch due rows of campaign p_campaign for claim token p_token, within the budget: at most
-- p_rate messages a second for the whole cluster (0: no limit), p_quota_hour in any p_hour_seconds and
-- p_quota_day in any p_day_seconds (0: none). Rows whose address is suppressed are settled 'suppressed'.
-- Each claimed row comes with its send slot, `slot_at`, and `delay`, the seconds from now until then (NULL
-- and 0 with no rate set; the rows of one claim are 1/p_rate apart). Only claimed rows take a slot and count against a quota.
--
-- While a limit is set, claims are taken one at a time across the cluster (the lock on the pace row); the
-- quotas are then read in a snapshot taken after the lock (each statement of a function takes its own),
-- so two nodes never both spend the last of a quota.
CREATE FUNCTION einmal.send_claim(p_campaign bigint, p_token text, p_batch integer, p_rate float8,
                                  p_quota_hour integer, p_quota_day integer,
                                  p_hour_seconds float8, p_day_seconds float8)
RETURNS TABLE (id bigint, account_id bigint, subscriber_id bigint, email text, email_lower text,
               attempts integer, name text, status text, attributes jsonb, slot_at timestamptz, delay float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    horizon CONSTANT float8 := 1.0;  -- seconds of slots a node may hold ahead of now
    allowance integer := p_batch;
    slot timestamptz := clock_timestamp();
    taken integer := 0;
BEGIN
    IF p_rate > 0 OR p_quota_hour > 0 OR p_quota_day > 0 THEN
        SELECT greatest(p.next_slot, clock_timestamp()) INTO slot
        FROM einmal.send_pace p WHERE p.scope = 'all' FOR UPDATE;
        IF p_rate > 0 THEN
            IF slot > clock_timestamp() + make_interval(secs => horizon) THEN
                RETURN;  -- the cluster's slots are taken that far ahead: nothing now
            END IF;
            allowance := least(allowance, greatest(1, ceil(p_rate * horizon)::integer));
        END IF;
        IF p_quota_hour > 0 THEN
            allowance := least(allowance, p_quota_hour - einmal.quota_used('hour', p_hour_seconds));
        END IF;
        IF p_quota_day > 0 THEN
            allowance := least(allowance, p_quota_day - einmal.quota_used('day', p_day_seconds));
        END IF;
        IF allowance <= 0 THEN
            RETURN;
        END IF;
    END IF;
    FOR id, account_id, subscriber_id, email, email_lower, attempts, name, status, attributes IN
        WITH picked AS MATERIALIZED (
            SELECT s.id, sub.name, sub.attributes,
                   EXISTS (SELECT 1 FROM einmal.suppressions x
                           WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower) AS suppressed
            FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
            WHERE s.campaign_id = p_campaign AND s.status = 'queued' AND s.next_attempt_at <= now()
              AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = p_campaign AND c.status = 'sending')
            ORDER BY s.next_attempt_at, s.id
            LIMIT allowance
            FOR UPDATE OF s SKIP LOCKED
        )
        UPDATE einmal.sends s SET
            status = CASE WHEN p.suppressed THEN 'suppressed' ELSE 'claimed' END,
            claimed_by = p_token,
            last_reply = CASE WHEN p.suppressed THEN 'suppressed when claimed' ELSE s.last_reply END,
            updated_at = now()
        FROM picked p
        WHERE s.id = p.id
        RETURNING s.id, s.account_id, s.subscriber_id, s.email, s.email_lower, s.attempts, p.name, s.status,
                  p.attributes
    LOOP
        slot_at := NULL;
        delay := 0;
        IF status = 'claimed' THEN
            IF p_rate > 0 THEN
                slot_at := slot + make_interval(secs => taken / p_rate);
                delay := extract(epoch FROM slot_at - clock_timestamp());
            END IF;
            taken := taken + 1;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF taken > 0 AND p_rate > 0 THEN
        UPDATE einmal.send_pace SET next_slot = slot + make_interval(secs => taken / p_rate)
        WHERE scope = 'all';
    END IF;
    IF taken > 0 AND p_quota_hour > 0 THEN
        PERFORM einmal.quota_charge('hour', p_hour_seconds, taken);
    END IF;
    IF taken > 0 AND p_quota_day > 0 THEN
        PERFORM einmal.quota_charge('day', p_day_seconds, taken);
    END IF;
END
$$;
