-- The bounces of mailbox $2 (any campaign of account $1) in the last $3 seconds that count toward the soft
-- bounce limit (a mailbox full, routing trouble, an expiry, a temporary failure; before 0030: kind soft).
-- One probe of sends_one_per_address (campaign_id, email_lower) per campaign of the account, then
-- bounces_send: no index of its own, and no scan of the account's other bounces.
SELECT count(*)
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = $2
JOIN einmal.bounces AS b ON b.send_id = s.id
WHERE c.account_id = $1 AND b.created_at > now() - make_interval(secs => $3)
  AND coalesce(b.counts, b.kind = 'soft')
