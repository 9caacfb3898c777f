-- The send row of campaign $1 to mailbox key $2 (another recipient named by the same report).
SELECT id, campaign_id, account_id, email, email_lower FROM einmal.sends WHERE campaign_id = $1 AND email_lower = $2
