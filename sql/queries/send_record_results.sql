-- record a group of SMTP outcomes; every move is guarded by the claim fence.
-- A row another node declared in doubt while this one stalled still takes
-- this node's own answer. 5.1.x bounces add a suppression for the account.
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[], $6::bool[])
        AS r(id, status, reply, attempts, retry_after, bounce)
), moved AS (
    UPDATE einmal.sends s SET
        status = r.status,
        last_reply = r.reply,
        attempts = s.attempts + r.attempts,
        next_attempt_at = CASE WHEN r.status = 'queued' THEN now() + make_interval(secs => r.retry_after)
                               ELSE s.next_attempt_at END,
        claimed_by = CASE WHEN r.status = 'queued' THEN NULL ELSE s.claimed_by END,
        sent_at = CASE WHEN r.status = 'sent' THEN now() END,
        updated_at = now()
    FROM r
    WHERE s.id = r.id AND s.claimed_by = $7 AND s.status IN ('sending', 'in_doubt')
    RETURNING s.id, s.account_id, s.email_lower, r.bounce
), bounced AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT account_id, email_lower, 'bounce' FROM moved WHERE bounce
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM moved
