-- CAS approved -> sending: of several nodes, exactly one gets the row back
WITH started AS (
    UPDATE einmal.campaigns SET status = 'sending', started_at = now(), updated_at = now()
    WHERE id = :campaign_id AND status = 'approved' AND scheduled_for <= now()
    RETURNING id, account_id
)
SELECT id, account_id, pg_notify('einmal_campaign', id::text) FROM started
