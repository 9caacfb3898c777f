-- chunks commit in ascending order, so every address up to the highest one
-- present is built: a crashed build resumes after it
SELECT coalesce(max(email_lower), '') FROM einmal.sends WHERE campaign_id = :campaign_id
