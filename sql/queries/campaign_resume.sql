-- CAS paused -> sending
UPDATE einmal.campaigns SET status = 'sending', updated_at = now()
WHERE id = $1 AND status = 'paused'
RETURNING id
