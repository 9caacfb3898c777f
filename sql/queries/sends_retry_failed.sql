-- failed -> queued for campaign :campaign_id's failed rows whose last reply is one of :replies (NULL: every failed row):
-- due now, owned by nobody, attempts from zero. A failed row was never accepted (a 5xx, a 4xx given up
-- on, a message that could not be rendered), so sending it again, with the same Message-ID, is no
-- duplicate. The last reply is kept until the next answer replaces it.
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'queued', claimed_by = NULL, attempts = 0, next_attempt_at = '-infinity', updated_at = now()
    WHERE campaign_id = :campaign_id AND status = 'failed'
      AND (:replies::text[] IS NULL OR coalesce(last_reply, '') = ANY (:replies::text[]))
    RETURNING 1
)
SELECT count(*) FROM moved
