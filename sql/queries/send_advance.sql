-- one round trip per group: record the outcomes of the group just sent
-- (:ids, :statuses, :replies, :attempts, :retry_afters, :bounces, guarded by the
-- claim fence :token) and move the next group (:start_ids)
-- claimed -> sending, so that at any moment at most one group per node is
-- on the wire unrecorded. The next group starts only where the row is still
-- ours, the address is not suppressed and the campaign is still sending; the
-- others are settled at once: suppressed, back to the queue (campaign
-- paused), or failed (campaign cancelled). Returns the started ids (a NULL id
-- when none), each with the count recorded and the outcomes lost. An empty :start_ids only records.
-- An outcome marked throttled (:throttled: the domain answered 421/4.7.x) goes back to
-- the queue in its place, with no attempt counted, and pauses its domain for
-- every node: :pause_seconds seconds, doubling with each throttle in a row up to
-- :pause_max_seconds; any
-- other answer from a paused domain closes its breaker (docs/design.md#sending-budget).
-- A refusal (5xx by policy or authentication) is throttled too, but its own row
-- is charged an attempt and waits its backoff, so that the next probe is another row.
-- A message's row (campaign id from 2^52, docs/design.md#messages) passes an unsubscribe unless it honours
-- one, and counts no tallies. The outcomes delivered, refused (5.7.x) and rejected (an address reason) are added to their campaign's
-- counts under :token, one row per campaign, for the campaign's self-pause (service/health.py); a message's to its
-- template's engagement, one row per template; each recipient delivered to has its last delivery written.
-- An outcome is recorded on a row this token still holds, whether `sending`, `in_doubt` (another node
-- declared it in doubt while this one stalled) or `claimed` (an asynchronous failover lost its move to
-- `sending`): an answer is an answer. One that finds no such row, and not already recorded either, is
-- kept in einmal.lost_outcomes and returned (`lost`) for the log: never dropped without a word (docs/design.md#liveness).
-- Each row is named with its campaign (:campaign_ids for the outcomes, :start_campaign_ids for the rows to
-- start), so that each lookup reads that campaign's partition alone, however many campaigns einmal.sends
-- holds (docs/design.md#retention).
WITH r AS (
    SELECT * FROM unnest(:ids::bigint[], :statuses::text[], :replies::text[], :attempts::int[],
                         :retry_afters::float8[], :bounces::bool[], :throttled::bool[], :campaign_ids::bigint[])
        AS r(id, status, reply, attempts, retry_after, bounce, throttled, campaign_id)
), st AS (
    SELECT * FROM unnest(:start_ids::bigint[], :start_campaign_ids::bigint[]) AS st(id, campaign_id)
), moved AS (
    UPDATE einmal.sends s SET
        status = r.status,
        last_reply = r.reply,
        attempts = s.attempts + r.attempts,
        next_attempt_at = CASE WHEN r.status = 'queued' AND (NOT r.throttled OR r.attempts > 0)
                               THEN now() + make_interval(secs => r.retry_after)
                               ELSE s.next_attempt_at END,
        claimed_by = CASE WHEN r.status = 'queued' THEN NULL ELSE s.claimed_by END,
        sent_at = CASE WHEN r.status = 'sent' THEN now() END,
        updated_at = now()
    FROM r
    WHERE s.id = r.id AND s.campaign_id = r.campaign_id AND s.claimed_by = :token
      AND s.status IN ('claimed', 'sending', 'in_doubt')
    RETURNING s.id, s.account_id, s.email_lower, r.bounce, r.throttled, r.reply,
              split_part(s.email_lower, '@', 2) AS domain, r.status = 'sent' OR r.attempts > 0 AS answered,
              s.campaign_id, r.status = 'sent' AS delivered, r.throttled AND r.attempts > 0 AS refused,
              s.subscriber_id
), lost AS (
    INSERT INTO einmal.lost_outcomes (send_id, campaign_id, subscriber_id, token, outcome, reply_code,
                                      found_status, found_claimed_by)
    SELECT u.id, s.campaign_id, s.subscriber_id, :token, u.status, substring(u.reply FROM '^[2-5][0-9][0-9]'),
           s.status, s.claimed_by
    FROM r u
    -- a lookup for each outcome that matched nothing, and none while all did (LIMIT keeps it a nested loop,
    -- whatever the statistics the generic plan was made with)
    LEFT JOIN LATERAL (SELECT * FROM einmal.sends s WHERE s.id = u.id AND s.campaign_id = u.campaign_id LIMIT 1) s
        ON true
    WHERE NOT EXISTS (SELECT 1 FROM moved m WHERE m.id = u.id)
      -- written again after its statement committed unanswered: already there
      AND (s.id IS NULL OR NOT (s.claimed_by = :token AND s.status = u.status))
    RETURNING send_id, campaign_id, subscriber_id, outcome, reply_code, found_status, found_claimed_by
), throttled AS (
    INSERT INTO einmal.domains AS d (domain, paused_until, failures, last_reply)
    SELECT DISTINCT ON (domain) domain, clock_timestamp() + make_interval(secs => :pause_seconds), 1, reply
    FROM moved WHERE throttled
    ON CONFLICT (domain) DO UPDATE SET
        -- a failed probe doubles the pause; answers of rows already on the wire when it began do not
        failures = d.failures + CASE WHEN d.probing OR d.paused_until <= now() THEN 1 ELSE 0 END,
        paused_until = greatest(d.paused_until, clock_timestamp() + einmal.domain_pause(
            d.failures + CASE WHEN d.probing OR d.paused_until <= now() THEN 1 ELSE 0 END,
            :pause_seconds, :pause_max_seconds)),
        probing = false,
        last_reply = EXCLUDED.last_reply
), reopened AS (
    UPDATE einmal.domains d SET failures = 0, paused_until = '-infinity', probing = false
    WHERE d.failures > 0 AND d.domain IN (SELECT domain FROM moved WHERE answered AND NOT throttled)
      AND d.domain NOT IN (SELECT domain FROM moved WHERE throttled)
), counted AS (
    -- the campaign's figures for its self-pause (service/health.py): one row per campaign and token, so
    -- no other writer waits for it
    INSERT INTO einmal.campaign_tallies AS k (campaign_id, source, delivered, refused, rejected)
    SELECT campaign_id, :token, count(*) FILTER (WHERE delivered), count(*) FILTER (WHERE refused),
           count(*) FILTER (WHERE bounce)
    FROM moved WHERE (delivered OR refused OR bounce) AND campaign_id < 4503599627370496  -- a message's: none
    GROUP BY campaign_id
    ON CONFLICT (campaign_id, source) DO UPDATE SET delivered = k.delivered + EXCLUDED.delivered,
        refused = k.refused + EXCLUDED.refused, rejected = k.rejected + EXCLUDED.rejected
), template_counted AS (
    -- a message's delivered and rejected outcomes, for its template's engagement (sql/migrations/0148): one row
    -- per template and token
    INSERT INTO einmal.engagement AS e (account_id, subject, source, delivered, rejected)
    SELECT m.account_id, 'template:' || coalesce(m.template, ''), :token, count(*) FILTER (WHERE v.delivered),
           count(*) FILTER (WHERE v.bounce)
    FROM moved AS v JOIN einmal.messages AS m ON m.campaign_id = v.campaign_id
    WHERE (v.delivered OR v.bounce) AND v.campaign_id >= 4503599627370496
    GROUP BY 1, 2
    ON CONFLICT (account_id, subject, source) DO UPDATE SET delivered = e.delivered + EXCLUDED.delivered,
        rejected = e.rejected + EXCLUDED.rejected
), last_delivered AS (
    -- each recipient's last delivery (a subscriber's last activity): one row each, in subscriber order
    INSERT INTO einmal.subscriber_deliveries AS d (subscriber_id, at)
    SELECT subscriber_id, now() FROM moved WHERE delivered GROUP BY subscriber_id ORDER BY subscriber_id
    ON CONFLICT (subscriber_id) DO UPDATE SET at = EXCLUDED.at
), bounced AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT account_id, email_lower, 'bounce' FROM moved WHERE bounce
    ON CONFLICT (account_id, email_lower) DO UPDATE SET reason = 'bounce'
        WHERE einmal.suppressions.reason = 'unsubscribe'  -- which messages pass (docs/design.md#messages)
), started AS (
    UPDATE einmal.sends s SET status = 'sending', updated_at = now()
    FROM st
    WHERE s.id = st.id AND s.campaign_id = st.campaign_id AND s.status = 'claimed' AND s.claimed_by = :token
      AND NOT EXISTS (SELECT 1 FROM einmal.suppressions x
                      WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower
                        AND (s.campaign_id < 4503599627370496 OR x.reason <> 'unsubscribe'
                             OR EXISTS (SELECT 1 FROM einmal.messages m
                                        WHERE m.campaign_id = s.campaign_id AND m.honour_unsubscribe)))
      AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = s.campaign_id AND c.status = 'sending')
    RETURNING s.id
), settled AS (
    UPDATE einmal.sends s SET
        status = CASE
            WHEN EXISTS (SELECT 1 FROM einmal.suppressions x
                         WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower
                           AND (s.campaign_id < 4503599627370496 OR x.reason <> 'unsubscribe'
                                OR EXISTS (SELECT 1 FROM einmal.messages m
                                           WHERE m.campaign_id = s.campaign_id AND m.honour_unsubscribe)))
                THEN 'suppressed'
            WHEN c.status = 'cancelled' THEN 'failed'
            ELSE 'queued' END,
        last_reply = CASE WHEN c.status = 'cancelled' THEN 'campaign cancelled' ELSE s.last_reply END,
        claimed_by = NULL, updated_at = now()
    FROM einmal.campaigns c, st
    WHERE c.id = s.campaign_id AND s.id = st.id AND s.campaign_id = st.campaign_id
      AND s.status = 'claimed' AND s.claimed_by = :token
      AND s.id NOT IN (SELECT id FROM started)
)
SELECT id, (SELECT count(*) FROM moved) AS recorded, (SELECT array_agg(lost) FROM lost) AS lost FROM started
UNION ALL
SELECT NULL, (SELECT count(*) FROM moved), (SELECT array_agg(lost) FROM lost) WHERE NOT EXISTS (SELECT 1 FROM started)
