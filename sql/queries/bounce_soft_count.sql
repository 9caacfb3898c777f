-- Soft bounces of mailbox $2 (any campaign of account $1) in the last $3 seconds.
SELECT count(*) FROM einmal.bounces b JOIN einmal.sends s ON s.id = b.send_id
WHERE b.account_id = $1 AND b.kind = 'soft' AND b.created_at > now() - make_interval(secs => $3)
  AND s.email_lower = $2
