-- give rows this node claimed but will not send back to the queue, and to the quotas that counted them
WITH released AS (
    SELECT id, updated_at FROM einmal.sends
    WHERE id = ANY ($1::bigint[]) AND status = 'claimed' AND claimed_by = $2
    FOR UPDATE
), queued AS (
    UPDATE einmal.sends s SET status = 'queued', claimed_by = NULL, updated_at = now()
    FROM released r WHERE s.id = r.id
)
SELECT einmal.quota_refund(array_agg(updated_at)) FROM released
