-- failed -> queued for campaign $1's failed rows whose last reply is one of $2 (NULL: every failed row):
-- due now, owned by nobody, attempts from zero. A failed row was never accepted (a 5xx, a 4xx given up
-- on, a message that could not be rendered), so sending it again, with the same Message-ID, is no
-- duplicate. The last reply is kept until the next answer replaces it.
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'queued', claimed_by = NULL, attempts = 0, next_attempt_at = '-infinity', updated_at = now()
    WHERE campaign_id = $1 AND status = 'failed'
      AND ($2::text[] IS NULL OR coalesce(last_reply, '') = ANY ($2::text[]))
    RETURNING 1
)
SELECT count(*) FROM moved
