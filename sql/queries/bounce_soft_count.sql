-- The bounces of mailbox :email_key (any campaign of account :account_id) in the last :window_seconds seconds that
-- count toward the soft bounce limit (a mailbox full, routing trouble, an expiry, a temporary failure; before 0030:
-- kind soft). One probe of sends_one_per_address (campaign_id, email_lower) per campaign of the account, then
-- bounces_send: no index of its own, and no scan of the account's other bounces.
SELECT count(*)
FROM einmal.campaigns AS c
JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = :email_key
JOIN einmal.bounces AS b ON b.send_id = s.id
WHERE c.account_id = :account_id AND b.created_at > now() - make_interval(secs => :window_seconds)
  AND coalesce(b.counts, b.kind = 'soft')
