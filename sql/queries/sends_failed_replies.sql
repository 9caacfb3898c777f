-- The distinct last replies of campaign $1's failed rows: campaign retry classifies each once
-- (service/inbound/reasons.py) or matches it against --reply, then names the ones to retry.
SELECT DISTINCT coalesce(last_reply, '') AS reply
FROM einmal.sends
WHERE campaign_id = $1 AND status = 'failed'
