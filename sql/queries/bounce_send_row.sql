-- The send row a bounce names: campaign :campaign_id, subscriber :subscriber_id.
SELECT id, campaign_id, account_id, email, email_lower FROM einmal.sends
    WHERE campaign_id = :campaign_id AND subscriber_id = :subscriber_id
