-- in_doubt -> queued, due now and owned by nobody; the resend carries the same Message-ID. All of campaign :campaign_id's
-- in-doubt rows, or only the ids in :ids and the mailbox keys in :keys when either is not NULL.
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'queued', claimed_by = NULL, next_attempt_at = '-infinity', updated_at = now()
    WHERE campaign_id = :campaign_id AND status = 'in_doubt'
      AND ((:ids::bigint[] IS NULL AND :keys::text[] IS NULL) OR id = ANY (:ids::bigint[]) OR email_lower = ANY (:keys::text[]))
    RETURNING 1
)
SELECT count(*) FROM moved
