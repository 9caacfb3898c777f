-- the accounts with message rows due (einmal.sends_messages' part of sends_claimable); they take turns with the
-- accounts of sending campaigns (actors/turns.py), whatever their order here
SELECT DISTINCT s.account_id FROM einmal.sends s
WHERE s.campaign_id >= 4503599627370496 AND s.status = 'queued' AND s.next_attempt_at <= now()
LIMIT 256
