-- a cancelled campaign leaves nothing queued: its unsent rows fail with a
-- reason; rows a node holds are settled by that node's next group statement
UPDATE einmal.sends SET status = 'failed', last_reply = 'campaign cancelled', claimed_by = NULL,
                        updated_at = now()
WHERE campaign_id = :campaign_id AND status = 'queued'
