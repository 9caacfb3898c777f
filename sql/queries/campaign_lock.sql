-- lock a built, sending campaign before deciding it is finished: the finish
-- then runs as a statement of its own and sees every row a concurrent
-- `reconcile --resend` committed
SELECT id FROM einmal.campaigns
WHERE id = :campaign_id AND status = 'sending' AND recipients_built_at IS NOT NULL
FOR UPDATE
