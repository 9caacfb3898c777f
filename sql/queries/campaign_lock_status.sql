-- Taken first by reconcile --resend/--mark-sent, so a concurrent finish of the campaign waits for us.
SELECT id, status FROM einmal.campaigns WHERE id = :campaign_id FOR UPDATE
