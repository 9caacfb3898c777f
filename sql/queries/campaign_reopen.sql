-- CAS sent -> sending, so that a node picks up rows queued again by reconcile --resend or campaign retry;
-- the counts kept when it finished go (campaign_finish.sql writes them again). A pruned campaign has no rows.
WITH reopened AS (
    UPDATE einmal.campaigns SET status = 'sending', sent_at = NULL, updated_at = now()
    WHERE id = :campaign_id AND status = 'sent' AND pruned_at IS NULL
    RETURNING id
), forgotten AS (
    DELETE FROM einmal.campaign_counts WHERE campaign_id IN (SELECT id FROM reopened)
)
SELECT id FROM reopened
