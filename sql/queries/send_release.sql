-- give rows this node claimed but will not send back to the queue
UPDATE einmal.sends SET status = 'queued', claimed_by = NULL, updated_at = now()
WHERE id = ANY ($1::bigint[]) AND status = 'claimed' AND claimed_by = $2
