-- in_doubt -> queued, due now and owned by nobody; the resend carries the same Message-ID
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'queued', claimed_by = NULL, next_attempt_at = '-infinity', updated_at = now()
    WHERE campaign_id = $1 AND status = 'in_doubt'
    RETURNING 1
)
SELECT count(*) FROM moved
