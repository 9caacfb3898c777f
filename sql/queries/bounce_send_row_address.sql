-- The send row of campaign :campaign_id to mailbox key :email_key (another recipient named by the same report).
SELECT id, campaign_id, account_id, email, email_lower FROM einmal.sends
    WHERE campaign_id = :campaign_id AND email_lower = :email_key
