-- in_doubt -> queued, due now and owned by nobody; the resend carries the same Message-ID. All of campaign $1's
-- in-doubt rows, or only the ids in $2 and the mailbox keys in $3 when either is not NULL.
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'queued', claimed_by = NULL, next_attempt_at = '-infinity', updated_at = now()
    WHERE campaign_id = $1 AND status = 'in_doubt'
      AND (($2::bigint[] IS NULL AND $3::text[] IS NULL) OR id = ANY ($2::bigint[]) OR email_lower = ANY ($3::text[]))
    RETURNING 1
)
SELECT count(*) FROM moved
