-- CAS paused -> sending; the pause's reason no longer holds
UPDATE einmal.campaigns SET status = 'sending', pause_reason = NULL, updated_at = now()
WHERE id = :campaign_id AND status = 'paused'
RETURNING id
