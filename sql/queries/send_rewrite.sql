-- After a failover, write again the outcomes a node recorded (its journal) or holds unrecorded, where the new
-- primary lost them (docs/design.md#liveness): ids :ids, each recorded under token :tokens as status :statuses (sent,
-- failed, in_doubt, suppressed, or queued: given back unsent or to be tried again), reply :replies, attempts added
-- :attempts, bounce :bounces, at epoch :ats, to be tried again after :retry_afters seconds (queued), and
-- :recorded_ats: the epoch the node recorded it at (from its journal; NULL for an answer it held unrecorded);
-- :campaign_ids the row's campaign, so that each row is read from its campaign's partition alone (0: its row is
-- gone). Compare-and-set: only a row behind the outcome moves to it: `claimed`, `sending` or `in_doubt` by the
-- outcome's token; for an outcome that ends the row's send also a row `queued` and claimed by nobody (the failover
-- lost its claim), and a row `claimed` or `sending` by another token since before :recorded_ats: the new primary
-- shows a state older than the answer (on the old primary that token gave the row back before this one could claim
-- it; a claim made on the new primary, after the failover, is later than :recorded_ats and is never touched). A row
-- that already shows the outcome is counted, and so is a return to the queue that finds its row no longer held by
-- its token (a return is no loss). Any other is never touched: it is kept in einmal.lost_outcomes and returned
-- (`lost`) for the log, as send_advance does.
WITH j AS (
    SELECT * FROM unnest(:ids::bigint[], :tokens::text[], :statuses::text[], :replies::text[], :attempts::int[],
                         :bounces::bool[], :ats::float8[], :retry_afters::float8[], :recorded_ats::float8[],
                         :campaign_ids::bigint[])
        AS j(id, token, status, reply, attempts, bounce, at, retry_after, recorded_at, campaign_id)
), there AS (
    SELECT j.id FROM j JOIN einmal.sends s ON s.id = j.id AND s.campaign_id = j.campaign_id
    WHERE CASE WHEN j.status = 'queued'
               THEN NOT (s.claimed_by = j.token AND s.status IN ('claimed', 'sending', 'in_doubt'))
               ELSE s.status = j.status AND s.claimed_by IS NOT DISTINCT FROM j.token END
), moved AS (
    UPDATE einmal.sends s SET
        status = j.status,
        last_reply = j.reply,
        attempts = s.attempts + j.attempts,
        claimed_by = CASE WHEN j.status = 'queued' THEN NULL ELSE j.token END,
        next_attempt_at = CASE WHEN j.status = 'queued' THEN now() + make_interval(secs => j.retry_after)
                               ELSE s.next_attempt_at END,
        sent_at = CASE WHEN j.status = 'sent' THEN to_timestamp(j.at) END,
        updated_at = now()
    FROM j
    WHERE s.id = j.id AND s.campaign_id = j.campaign_id
      AND ((s.claimed_by = j.token AND s.status IN ('claimed', 'sending', 'in_doubt'))
           OR (j.status <> 'queued' AND s.status = 'queued' AND s.claimed_by IS NULL)
           OR (j.status <> 'queued' AND s.status IN ('claimed', 'sending') AND s.claimed_by <> j.token
               AND s.updated_at <= to_timestamp(j.recorded_at)))
      AND j.id NOT IN (SELECT id FROM there)
    RETURNING s.id, s.account_id, s.email_lower, j.bounce
), bounced AS (
    -- the suppression a bounce made may have been lost with the row's outcome
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT account_id, email_lower, 'bounce' FROM moved WHERE bounce
    ON CONFLICT DO NOTHING
), lost AS (
    INSERT INTO einmal.lost_outcomes (send_id, campaign_id, subscriber_id, token, outcome, reply_code,
                                      found_status, found_claimed_by)
    SELECT j.id, s.campaign_id, s.subscriber_id, j.token, j.status, substring(j.reply FROM '^[2-5][0-9][0-9]'),
           s.status, s.claimed_by
    FROM j LEFT JOIN einmal.sends s ON s.id = j.id AND s.campaign_id = j.campaign_id
    WHERE j.id NOT IN (SELECT id FROM moved) AND j.id NOT IN (SELECT id FROM there)
    RETURNING send_id, campaign_id, subscriber_id, outcome, reply_code, found_status, found_claimed_by, token
)
SELECT (SELECT count(*) FROM moved) AS rewritten, (SELECT count(*) FROM there) AS there,
       (SELECT array_agg(lost) FROM lost) AS lost
