-- CAS paused -> sending; the pause's reason no longer holds
UPDATE einmal.campaigns SET status = 'sending', pause_reason = NULL, updated_at = now()
WHERE id = $1 AND status = 'paused'
RETURNING id
