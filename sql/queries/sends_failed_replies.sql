-- The distinct last replies of campaign :campaign_id's failed rows: campaign retry classifies each once
-- (service/smtp/reasons.py) or matches it against --reply, then names the ones to retry.
SELECT DISTINCT coalesce(last_reply, '') AS reply
FROM einmal.sends
WHERE campaign_id = :campaign_id AND status = 'failed'
