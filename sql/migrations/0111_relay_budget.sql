-- A relay's own rate and quotas (einmal.relays, 0110_account_identity.sql), for every node and every account
-- that sends through it, kept in the claim beside the cluster's (docs/design.md#sending-budget): a relay's
-- next free send slot on its row, its quota windows in einmal.send_quota under the scope 'relay:<id>'.
-- The cluster's own windows are the scope 'all'; only they are refunded for rows given back unsent (a
-- relay's quota counts such a row until its window passes: never exceeded, short by those rows).

ALTER TABLE einmal.relays ADD COLUMN next_slot timestamptz NOT NULL DEFAULT '-infinity';

ALTER TABLE einmal.send_quota ADD COLUMN scope text NOT NULL DEFAULT 'all';
ALTER TABLE einmal.send_quota DROP CONSTRAINT send_quota_pkey;
ALTER TABLE einmal.send_quota ADD PRIMARY KEY (scope, win, bucket);

CREATE FUNCTION einmal.quota_used_in(p_scope text, p_win text, p_window float8) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(n), 0) FROM einmal.send_quota
    WHERE scope = p_scope AND win = p_win AND bucket + width > clock_timestamp() - make_interval(secs => p_window)
$$;

CREATE OR REPLACE FUNCTION einmal.quota_used(p_win text, p_window float8) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT einmal.quota_used_in('all', p_win, p_window)
$$;

CREATE OR REPLACE FUNCTION einmal.quota_refund(claimed_at timestamptz[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE einmal.send_quota q SET n = greatest(0, q.n - r.k)  -- rows claimed with no quota set counted nothing
    FROM (SELECT b.win, b.bucket, count(*) AS k
          FROM unnest(claimed_at) AS t(at)
          JOIN einmal.send_quota b ON b.scope = 'all' AND b.bucket <= t.at AND b.bucket + b.width > t.at
          GROUP BY b.win, b.bucket) r
    WHERE q.scope = 'all' AND q.win = r.win AND q.bucket = r.bucket
$$;

CREATE FUNCTION einmal.quota_charge_in(p_scope text, p_win text, p_window float8, p_n integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    w float8 := p_window / 60;
    now_s float8 := extract(epoch FROM now());  -- the claim's time: the claimed rows' updated_at
BEGIN
    INSERT INTO einmal.send_quota (scope, win, bucket, width, n)
    VALUES (p_scope, p_win, to_timestamp(floor(now_s / w) * w), make_interval(secs => w), p_n)
    ON CONFLICT (scope, win, bucket) DO UPDATE SET n = einmal.send_quota.n + EXCLUDED.n;
    DELETE FROM einmal.send_quota
    WHERE scope = p_scope AND win = p_win AND bucket + width < clock_timestamp() - make_interval(secs => 2 * p_window);
END
$$;

CREATE OR REPLACE FUNCTION einmal.quota_charge(p_win text, p_window float8, p_n integer) RETURNS void
LANGUAGE sql AS $$
    SELECT einmal.quota_charge_in('all', p_win, p_window, p_n)
$$;

DROP FUNCTION einmal.send_claim(bigint, text, integer, float8, integer, integer, float8, float8, text[], float8[],
                                integer, float8, float8);

-- Claim up to p_batch due rows of campaign p_campaign for claim token p_token, within the budget: at most
-- p_rate messages a second for the whole cluster (0: no limit), p_quota_hour in any p_hour_seconds and
-- p_quota_day in any p_day_seconds (0: none); per domain, p_domain_rates[i] a second to p_domains[i],
-- nothing to a paused domain and p_probes rows to one whose pause is over; and within the rate and quotas
-- of each relay named in p_relays that has any (einmal.relays: every row claimed takes a slot of each and
-- counts against each one's quotas, docs/design.md#sending-budget). Rows whose address is
-- suppressed are settled 'suppressed'. Each claimed row comes with its send slot, `slot_at`, and `delay`,
-- the seconds from now until then (NULL and 0 when no rate applies to it). Only claimed rows take a slot and
-- count against a quota.
--
-- While a limit is set, claims are taken one at a time across the cluster (the lock on the pace row, or on
-- the limited domains' rows); what they decide on is then read in a snapshot taken after the lock (each
-- statement of a function takes its own), so two nodes never both spend the last of a quota or a slot.
CREATE FUNCTION einmal.send_claim(p_campaign bigint, p_token text, p_batch integer, p_rate float8,
                                  p_quota_hour integer, p_quota_day integer,
                                  p_hour_seconds float8, p_day_seconds float8,
                                  p_domains text[], p_domain_rates float8[], p_probes integer,
                                  p_pause float8, p_pause_max float8, p_relays text[] DEFAULT '{}')
RETURNS TABLE (id bigint, account_id bigint, subscriber_id bigint, email text, email_lower text,
               attempts integer, name text, status text, attributes jsonb, slot_at timestamptz, delay float8)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    horizon CONSTANT float8 := 1.0;  -- seconds of slots a node may hold ahead of now
    allowance integer := p_batch;
    slot timestamptz := clock_timestamp();
    taken integer := 0;
    n_domains integer := coalesce(array_length(p_domains, 1), 0);
    domain_start timestamptz[];
    domain_taken integer[] := array_fill(0, ARRAY[n_domains]);
    guarded boolean;  -- any domain paused or limited: rows are checked against einmal.domains
    probe_rights text[] := '{}';  -- domains whose pause is over, whose probes this claim takes
    i integer;
    row_slot timestamptz;
    relay_ids bigint[] := '{}';  -- the limited relays of p_relays, locked in id order
    relay_rates float8[];
    relay_start timestamptz[];
    relay_quota_hour integer[];
    relay_quota_day integer[];
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
    IF cardinality(p_relays) > 0 THEN
        SELECT coalesce(array_agg(r.id ORDER BY r.id), '{}'), array_agg(r.rate ORDER BY r.id),
               array_agg(greatest(r.next_slot, clock_timestamp()) ORDER BY r.id),
               array_agg(r.quota_hour ORDER BY r.id), array_agg(r.quota_day ORDER BY r.id)
        INTO relay_ids, relay_rates, relay_start, relay_quota_hour, relay_quota_day
        FROM (SELECT * FROM einmal.relays WHERE einmal.relays.name = ANY (p_relays)
                AND (rate IS NOT NULL OR quota_hour IS NOT NULL OR quota_day IS NOT NULL)
              ORDER BY einmal.relays.id FOR UPDATE) r;
        FOR i IN 1 .. cardinality(relay_ids) LOOP
            IF relay_rates[i] IS NOT NULL THEN
                IF relay_start[i] > clock_timestamp() + make_interval(secs => horizon) THEN
                    RETURN;  -- the relay's slots are taken that far ahead
                END IF;
                allowance := least(allowance, greatest(1, ceil(relay_rates[i] * horizon)::integer));
            END IF;
            IF relay_quota_hour[i] IS NOT NULL THEN
                allowance := least(allowance, relay_quota_hour[i]
                                   - einmal.quota_used_in('relay:' || relay_ids[i], 'hour', p_hour_seconds));
            END IF;
            IF relay_quota_day[i] IS NOT NULL THEN
                allowance := least(allowance, relay_quota_day[i]
                                   - einmal.quota_used_in('relay:' || relay_ids[i], 'day', p_day_seconds));
            END IF;
        END LOOP;
        IF allowance <= 0 THEN
            RETURN;
        END IF;
    END IF;
    IF n_domains > 0 THEN
        INSERT INTO einmal.domains (domain) SELECT unnest(p_domains) ON CONFLICT DO NOTHING;
        SELECT array_agg(greatest(d.next_slot, clock_timestamp()) ORDER BY k) INTO domain_start
        FROM unnest(p_domains) WITH ORDINALITY AS c(domain, k)
        JOIN (SELECT * FROM einmal.domains WHERE domain = ANY (p_domains) ORDER BY domain FOR UPDATE) d
          ON d.domain = c.domain;
    END IF;
    guarded := n_domains > 0 OR EXISTS (SELECT 1 FROM einmal.domains WHERE failures > 0);
    IF guarded THEN
        -- the right to probe a domain whose pause is over goes to one claim: the pause is armed again at
        -- once (a second claim waits for the row, then sees it paused); the probes' answers decide
        WITH armed AS (
            UPDATE einmal.domains d
            SET paused_until = clock_timestamp() + einmal.domain_pause(d.failures, p_pause, p_pause_max),
                probing = true
            WHERE d.failures > 0 AND d.paused_until <= now()
              AND EXISTS (SELECT 1 FROM einmal.sends s
                          WHERE s.campaign_id = p_campaign AND s.status = 'queued' AND s.next_attempt_at <= now()
                            AND split_part(s.email_lower, '@', 2) = d.domain)
            RETURNING d.domain
        )
        SELECT coalesce(array_agg(armed.domain), '{}') INTO probe_rights FROM armed;
    END IF;
    FOR id, account_id, subscriber_id, email, email_lower, attempts, name, status, attributes IN
        WITH picked AS MATERIALIZED (
            SELECT s.id, sub.name, sub.attributes, s.next_attempt_at, split_part(s.email_lower, '@', 2) AS domain,
                   EXISTS (SELECT 1 FROM einmal.suppressions x
                           WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower) AS suppressed
            FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
            WHERE s.campaign_id = p_campaign AND s.status = 'queued' AND s.next_attempt_at <= now()
              AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = p_campaign AND c.status = 'sending')
              -- a paused domain, or one whose slots are taken a horizon ahead, waits
              AND (NOT guarded OR NOT EXISTS (
                  SELECT 1 FROM einmal.domains d WHERE d.domain = split_part(s.email_lower, '@', 2)
                    AND ((d.paused_until > now() AND d.domain <> ALL (probe_rights))
                         OR d.next_slot > now() + make_interval(secs => horizon))))
            ORDER BY s.next_attempt_at, s.id
            LIMIT allowance
            FOR UPDATE OF s SKIP LOCKED
        ), ranked AS (
            SELECT p.*, row_number() OVER (PARTITION BY p.domain ORDER BY p.next_attempt_at, p.id) AS k
            FROM picked p
        ), kept AS (
            -- a domain whose pause is over takes p_probes rows; a domain with a rate a horizon of slots
            SELECT r.* FROM ranked r LEFT JOIN einmal.domains d ON guarded AND d.domain = r.domain
            WHERE d.domain IS NULL
               OR r.k <= CASE WHEN d.failures > 0 THEN p_probes
                              WHEN d.domain = ANY (p_domains) THEN greatest(1, ceil(
                                  p_domain_rates[array_position(p_domains, d.domain)] * horizon))
                              ELSE allowance END
        )
        UPDATE einmal.sends s SET
            status = CASE WHEN p.suppressed THEN 'suppressed' ELSE 'claimed' END,
            claimed_by = p_token,
            last_reply = CASE WHEN p.suppressed THEN 'suppressed when claimed' ELSE s.last_reply END,
            updated_at = now()
        FROM kept p
        WHERE s.id = p.id
        RETURNING s.id, s.account_id, s.subscriber_id, s.email, s.email_lower, s.attempts, p.name, s.status,
                  p.attributes
    LOOP
        slot_at := NULL;
        delay := 0;
        IF status = 'claimed' THEN
            IF p_rate > 0 THEN
                slot_at := slot + make_interval(secs => taken / p_rate);
            END IF;
            FOR i IN 1 .. cardinality(relay_ids) LOOP
                IF relay_rates[i] IS NOT NULL THEN
                    slot_at := greatest(slot_at, relay_start[i] + make_interval(secs => taken / relay_rates[i]));
                END IF;
            END LOOP;
            taken := taken + 1;
            IF guarded THEN
                i := array_position(p_domains, split_part(email_lower, '@', 2));
                IF i IS NOT NULL THEN
                    row_slot := domain_start[i] + make_interval(secs => domain_taken[i] / p_domain_rates[i]);
                    domain_taken[i] := domain_taken[i] + 1;
                    slot_at := greatest(slot_at, row_slot);
                END IF;
            END IF;
            IF slot_at IS NOT NULL THEN
                delay := extract(epoch FROM slot_at - clock_timestamp());
            END IF;
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
    FOR i IN 1 .. cardinality(relay_ids) LOOP
        IF taken > 0 AND relay_rates[i] IS NOT NULL THEN
            UPDATE einmal.relays SET next_slot = relay_start[i] + make_interval(secs => taken / relay_rates[i])
            WHERE einmal.relays.id = relay_ids[i];
        END IF;
        IF taken > 0 AND relay_quota_hour[i] IS NOT NULL THEN
            PERFORM einmal.quota_charge_in('relay:' || relay_ids[i], 'hour', p_hour_seconds, taken);
        END IF;
        IF taken > 0 AND relay_quota_day[i] IS NOT NULL THEN
            PERFORM einmal.quota_charge_in('relay:' || relay_ids[i], 'day', p_day_seconds, taken);
        END IF;
    END LOOP;
    FOR i IN 1 .. n_domains LOOP
        IF domain_taken[i] > 0 THEN
            UPDATE einmal.domains
            SET next_slot = domain_start[i] + make_interval(secs => domain_taken[i] / p_domain_rates[i])
            WHERE domain = p_domains[i];
        END IF;
    END LOOP;
END
$$;
