-- CAS sending -> paused, recording why (:reason); the claimer takes no rows of a campaign that is not sending
UPDATE einmal.campaigns SET status = 'paused', pause_reason = :reason, updated_at = now()
WHERE id = :campaign_id AND status = 'sending'
RETURNING id
