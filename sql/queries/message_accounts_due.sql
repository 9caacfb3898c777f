-- the accounts with message rows due (einmal.sends_messages' part of sends_claimable), oldest first
SELECT s.account_id FROM einmal.sends s
WHERE s.campaign_id >= 4503599627370496 AND s.status = 'queued' AND s.next_attempt_at <= now()
GROUP BY s.account_id
ORDER BY min(s.next_attempt_at)
LIMIT 32
