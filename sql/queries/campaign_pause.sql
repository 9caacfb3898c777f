-- CAS sending -> paused, recording why ($2); the claimer takes no rows of a campaign that is not sending
UPDATE einmal.campaigns SET status = 'paused', pause_reason = $2, updated_at = now()
WHERE id = $1 AND status = 'sending'
RETURNING id
