-- in_doubt -> sent: the operator decided the server accepted them. All of campaign :campaign_id's in-doubt rows, or only
-- the ids in :ids and the mailbox keys in :keys when either is not NULL.
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'sent', sent_at = now(), updated_at = now()
    WHERE campaign_id = :campaign_id AND status = 'in_doubt'
      AND ((:ids::bigint[] IS NULL AND :keys::text[] IS NULL) OR id = ANY (:ids::bigint[]) OR email_lower = ANY (:keys::text[]))
    RETURNING 1
)
SELECT count(*) FROM moved
