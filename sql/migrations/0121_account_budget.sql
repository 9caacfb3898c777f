-- Accounts take turns and each has a budget of its own (docs/design.md#sending-budget): an account's rate and
-- hour/day quotas (NULL: the installation's defaults, EINMAL_ACCOUNT_RATE_LIMIT, EINMAL_ACCOUNT_QUOTA_HOUR,
-- EINMAL_ACCOUNT_QUOTA_DAY, passed to the claim; 0: none), kept in the claim beside the cluster's: its next free
-- send slot is the send_pace row 'account:<id>', its quota windows einmal.send_quota's scope 'account:<id>'
-- (counted as a relay's are: a row given back unsent counts until its window passes). And a bound on an account's
-- messages queued and not yet sent (NULL: EINMAL_ACCOUNT_MESSAGES_QUEUED), counted on the index below when a
-- message is made (service/messages/messages.py).
ALTER TABLE einmal.accounts
    ADD COLUMN send_rate float8 CHECK (send_rate >= 0),
    ADD COLUMN send_quota_hour integer CHECK (send_quota_hour >= 0),
    ADD COLUMN send_quota_day integer CHECK (send_quota_day >= 0),
    ADD COLUMN messages_queued_max integer CHECK (messages_queued_max >= 0);

CREATE INDEX sends_messages_unsent ON einmal.sends_messages (account_id) WHERE status IN ('queued', 'claimed', 'sending');

DROP FUNCTION einmal.send_claim(bigint, text, integer, float8, integer, integer, float8, float8, text[], float8[],
                                integer, float8, float8, text[], bigint);

-- Claim up to p_batch due rows of campaign p_campaign for claim token p_token, within the budget: at most
-- p_rate messages a second for the whole cluster (0: no limit), p_quota_hour in any p_hour_seconds and
-- p_quota_day in any p_day_seconds (0: none); per domain, p_domain_rates[i] a second to p_domains[i],
-- nothing to a paused domain and p_probes rows to one whose pause is over; and within the rate and quotas
-- of each relay named in p_relays that has any (einmal.relays: every row claimed takes a slot of each and
-- counts against each one's quotas, docs/design.md#sending-budget); and within the rate and quotas of the
-- rows' account (p_account, else p_campaign's): its own in einmal.accounts, else p_account_rate,
-- p_account_quota_hour and p_account_quota_day (0: none), a pace and quotas of its own as a relay's are.
-- p_reach: seconds of the cluster's slots the same account's turn took just before (its messages, then its
-- campaign's rows: actors/turns.py), by which the horizon reaches further for this claim, so that one turn is
-- let in whole, not its first claim alone. Rows whose address is
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
                                  p_pause float8, p_pause_max float8, p_relays text[] DEFAULT '{}',
                                  p_account bigint DEFAULT NULL, p_account_rate float8 DEFAULT 0,
                                  p_account_quota_hour integer DEFAULT 0, p_account_quota_day integer DEFAULT 0,
                                  p_reach float8 DEFAULT 0)
RETURNS TABLE (id bigint, account_id bigint, subscriber_id bigint, email text, email_lower text,
               attempts integer, name text, status text, attributes jsonb, slot_at timestamptz, delay float8,
               campaign_id bigint, honour_unsubscribe boolean)
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
    the_account bigint := coalesce(p_account, (SELECT c.account_id FROM einmal.campaigns c WHERE c.id = p_campaign));
    account_scope text := 'account:' || the_account;
    account_rate float8 := 0;
    account_hour integer := 0;
    account_day integer := 0;
    account_slot timestamptz;
    -- a step's campaign (migration 0115): its rows of members who left its sequence are settled, not claimed
    step_sequence bigint := (SELECT c.sequence_id FROM einmal.campaigns c WHERE c.id = p_campaign AND c.kind = 'step');
BEGIN
    IF p_rate > 0 OR p_quota_hour > 0 OR p_quota_day > 0 THEN
        SELECT greatest(p.next_slot, clock_timestamp()) INTO slot
        FROM einmal.send_pace p WHERE p.scope = 'all' FOR UPDATE;
        IF p_rate > 0 THEN
            IF slot > clock_timestamp() + make_interval(secs => horizon + p_reach) THEN
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
    IF the_account IS NOT NULL THEN
        SELECT coalesce(a.send_rate, p_account_rate), coalesce(a.send_quota_hour, p_account_quota_hour),
               coalesce(a.send_quota_day, p_account_quota_day)
        INTO account_rate, account_hour, account_day
        FROM einmal.accounts a WHERE a.id = the_account;
    END IF;
    IF account_rate > 0 OR account_hour > 0 OR account_day > 0 THEN
        -- after the cluster's row: every claim locks 'all' first, then its one account's
        INSERT INTO einmal.send_pace (scope, next_slot) VALUES (account_scope, '-infinity') ON CONFLICT DO NOTHING;
        SELECT greatest(p.next_slot, clock_timestamp()) INTO account_slot
        FROM einmal.send_pace p WHERE p.scope = account_scope FOR UPDATE;
        IF account_rate > 0 THEN
            IF account_slot > clock_timestamp() + make_interval(secs => horizon) THEN
                RETURN;  -- the account's slots are taken that far ahead
            END IF;
            allowance := least(allowance, greatest(1, ceil(account_rate * horizon)::integer));
        END IF;
        IF account_hour > 0 THEN
            allowance := least(allowance, account_hour - einmal.quota_used_in(account_scope, 'hour', p_hour_seconds));
        END IF;
        IF account_day > 0 THEN
            allowance := least(allowance, account_day - einmal.quota_used_in(account_scope, 'day', p_day_seconds));
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
                          WHERE (s.campaign_id = p_campaign
                                 OR (p_campaign IS NULL AND s.campaign_id >= 4503599627370496
                                     AND (p_account IS NULL OR s.account_id = p_account)))
                            AND s.status = 'queued' AND s.next_attempt_at <= now()
                            AND split_part(s.email_lower, '@', 2) = d.domain)
            RETURNING d.domain
        )
        SELECT coalesce(array_agg(armed.domain), '{}') INTO probe_rights FROM armed;
    END IF;
    FOR id, account_id, subscriber_id, email, email_lower, attempts, name, status, attributes, campaign_id,
        honour_unsubscribe IN
        -- a campaign's rows (p_campaign) or the messages' (NULL): two branches, each planned for its own index
        -- order (sends_claimable by campaign, next_attempt_at, id); the one not asked for is a one-time false
        WITH picked_campaign AS MATERIALIZED (
            SELECT s.id, sub.name, sub.attributes, s.next_attempt_at, split_part(s.email_lower, '@', 2) AS domain,
                   true AS honour_unsubscribe,
                   EXISTS (SELECT 1 FROM einmal.suppressions x
                           WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower) AS suppressed,
                   -- a retry of a step whose member left while it was on the wire (the leave settles only
                   -- the rows not yet there): settled as the leave would have (docs/design.md#sequences)
                   step_sequence IS NOT NULL AND EXISTS (
                       SELECT 1 FROM einmal.sequence_members m
                       WHERE m.sequence_id = step_sequence AND m.subscriber_id = s.subscriber_id
                         AND m.left_at IS NOT NULL) AS left_it
            FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
            WHERE p_campaign IS NOT NULL
              AND s.campaign_id = p_campaign AND s.status = 'queued' AND s.next_attempt_at <= now()
              AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = p_campaign AND c.status = 'sending')
              -- a paused domain, or one whose slots are taken a horizon ahead, waits
              AND (NOT guarded OR NOT EXISTS (
                  SELECT 1 FROM einmal.domains d WHERE d.domain = split_part(s.email_lower, '@', 2)
                    AND ((d.paused_until > now() AND d.domain <> ALL (probe_rights))
                         OR d.next_slot > now() + make_interval(secs => horizon))))
            ORDER BY s.next_attempt_at, s.id
            LIMIT allowance
            FOR UPDATE OF s SKIP LOCKED
        ), picked_messages AS MATERIALIZED (
            -- a message's data over its subscriber's attributes; an unsubscribe stops it only if it honours one
            SELECT s.id, sub.name, sub.attributes || m.data AS attributes, s.next_attempt_at,
                   split_part(s.email_lower, '@', 2) AS domain, m.honour_unsubscribe,
                   EXISTS (SELECT 1 FROM einmal.suppressions x
                           WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower
                             AND (x.reason <> 'unsubscribe' OR m.honour_unsubscribe)) AS suppressed,
                   false AS left_it
            FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
            JOIN einmal.messages m ON m.campaign_id = s.campaign_id
            WHERE p_campaign IS NULL
              AND s.campaign_id >= 4503599627370496 AND s.status = 'queued' AND s.next_attempt_at <= now()
              AND (p_account IS NULL OR s.account_id = p_account)
              AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = s.campaign_id AND c.status = 'sending')
              AND (NOT guarded OR NOT EXISTS (
                  SELECT 1 FROM einmal.domains d WHERE d.domain = split_part(s.email_lower, '@', 2)
                    AND ((d.paused_until > now() AND d.domain <> ALL (probe_rights))
                         OR d.next_slot > now() + make_interval(secs => horizon))))
            ORDER BY s.next_attempt_at, s.id
            LIMIT allowance
            FOR UPDATE OF s SKIP LOCKED
        ), picked AS (
            SELECT id, name, attributes, next_attempt_at, domain, honour_unsubscribe, suppressed, left_it FROM picked_campaign
            UNION ALL
            SELECT id, name, attributes, next_attempt_at, domain, honour_unsubscribe, suppressed, left_it FROM picked_messages
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
            status = CASE WHEN p.suppressed OR p.left_it THEN 'suppressed' ELSE 'claimed' END,
            claimed_by = p_token,
            last_reply = CASE WHEN p.suppressed THEN 'suppressed when claimed' WHEN p.left_it THEN 'left the list'
                              ELSE s.last_reply END,
            updated_at = now()
        FROM kept p
        WHERE s.id = p.id
        RETURNING s.id, s.account_id, s.subscriber_id, s.email, s.email_lower, s.attempts, p.name, s.status,
                  p.attributes, s.campaign_id, p.honour_unsubscribe
    LOOP
        slot_at := NULL;
        delay := 0;
        IF status = 'claimed' THEN
            IF p_rate > 0 THEN
                slot_at := slot + make_interval(secs => taken / p_rate);
            END IF;
            IF account_rate > 0 THEN
                slot_at := greatest(slot_at, account_slot + make_interval(secs => taken / account_rate));
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
    IF taken > 0 AND account_rate > 0 THEN
        UPDATE einmal.send_pace SET next_slot = account_slot + make_interval(secs => taken / account_rate)
        WHERE scope = account_scope;
    END IF;
    IF taken > 0 AND account_hour > 0 THEN
        PERFORM einmal.quota_charge_in(account_scope, 'hour', p_hour_seconds, taken);
    END IF;
    IF taken > 0 AND account_day > 0 THEN
        PERFORM einmal.quota_charge_in(account_scope, 'day', p_day_seconds, taken);
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
