-- CAS sending -> paused; the claimer takes no rows of a campaign that is not sending
UPDATE einmal.campaigns SET status = 'paused', updated_at = now()
WHERE id = $1 AND status = 'sending'
RETURNING id
