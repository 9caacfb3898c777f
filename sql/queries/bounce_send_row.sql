-- The send row a bounce names: campaign $1, subscriber $2.
SELECT id, campaign_id, account_id, email, email_lower FROM einmal.sends WHERE campaign_id = $1 AND subscriber_id = $2
