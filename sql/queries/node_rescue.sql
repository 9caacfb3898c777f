-- return the rows of dead nodes (:node_timeout_seconds: heartbeat older than this many seconds,
-- or the ids in :dead_tokens, or no longer in the table at all): claimed rows never reached the wire and go back to the
-- queue; a sending row may have been accepted, so it is in doubt (:in_doubt = 'hold')
-- or, under at-least-once (:in_doubt = 'resend'), an attempt: queued again, or in doubt once it has had
-- :max_attempts (EINMAL_MAX_ATTEMPTS) attempts, so that a node dying again and again cannot resend without end.
WITH dead AS (
    DELETE FROM einmal.nodes
    WHERE heartbeat_at < now() - make_interval(secs => :node_timeout_seconds) OR id = ANY (:dead_tokens::text[])
    RETURNING id
), held AS MATERIALIZED (
    -- a row locked by a statement still running (or by a frozen backend) is skipped, not waited for: one
    -- hung connection must not stall every node's scheduler, hence every heartbeat; the next tick retries
    SELECT s.id, s.status, s.updated_at FROM einmal.sends s
    WHERE s.status IN ('claimed', 'sending')
      AND (s.claimed_by IN (SELECT id FROM dead) OR s.claimed_by = ANY (:dead_tokens::text[])
           -- a token with no node row at all (its row was removed as dead before)
           OR NOT EXISTS (SELECT 1 FROM einmal.nodes n WHERE n.id = s.claimed_by))
    FOR UPDATE OF s SKIP LOCKED
), rescued AS (
    UPDATE einmal.sends s SET
        status = CASE WHEN s.status = 'claimed' AND c.status = 'cancelled' THEN 'failed'
                      WHEN s.status = 'claimed' THEN 'queued'
                      WHEN :in_doubt = 'resend' AND s.attempts + 1 < :max_attempts THEN 'queued' ELSE 'in_doubt' END,
        claimed_by = CASE WHEN s.status = 'sending'
                               AND (:in_doubt = 'hold' OR s.attempts + 1 >= :max_attempts) THEN s.claimed_by END,
        attempts = s.attempts + CASE WHEN s.status = 'sending' AND :in_doubt = 'resend' THEN 1 ELSE 0 END,
        last_reply = CASE WHEN s.status = 'claimed' AND c.status = 'cancelled' THEN 'campaign cancelled'
                          WHEN s.status = 'sending' AND :in_doubt = 'resend' AND s.attempts + 1 >= :max_attempts
                          THEN 'node ' || s.claimed_by || ' died during the SMTP transaction (still in doubt after '
                               || s.attempts + 1 || ' attempts)'
                          WHEN s.status = 'sending' THEN 'node ' || s.claimed_by || ' died during the SMTP transaction'
                          ELSE s.last_reply END,
        updated_at = now()
    FROM einmal.campaigns c, held h
    WHERE s.id = h.id AND c.id = s.campaign_id
    RETURNING s.status
), refunded AS (
    -- claimed rows never went out: the quotas that counted them get them back (0010_send_budget.sql)
    SELECT einmal.quota_refund(array_agg(updated_at)) FROM held WHERE status = 'claimed'
)
SELECT (SELECT count(*) FROM dead) AS nodes, (SELECT count(*) FROM refunded) AS refunded,
       count(*) FILTER (WHERE status = 'queued') AS queued,
       count(*) FILTER (WHERE status = 'in_doubt') AS in_doubt
FROM rescued
