-- CAS any state before sent -> cancelled. Send rows stay as they are: no node claims rows
-- of a campaign that is not sending.
UPDATE einmal.campaigns SET status = 'cancelled', updated_at = now()
WHERE id = :campaign_id AND status IN ('draft', 'approved', 'sending', 'paused')
RETURNING id
