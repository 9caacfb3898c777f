-- CAS sending -> sent once recipients are built and nothing is left to send
WITH finished AS (
    UPDATE einmal.campaigns c SET status = 'sent', sent_at = now(), updated_at = now()
    WHERE c.id = $1 AND c.status = 'sending' AND c.recipients_built_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM einmal.sends s
                      WHERE s.campaign_id = c.id AND s.status IN ('queued', 'claimed', 'sending'))
    RETURNING c.id
)
SELECT id, pg_notify('einmal_campaign', id::text) FROM finished
