-- give rows this node claimed but will not send back to the queue, and to the quotas that counted them
WITH released AS (
    SELECT s.id, s.campaign_id, s.updated_at
    -- each row with its campaign: one partition
    FROM unnest(:ids::bigint[], :campaign_ids::bigint[]) AS g(id, campaign_id)
    JOIN einmal.sends s ON s.id = g.id AND s.campaign_id = g.campaign_id
    WHERE s.status = 'claimed' AND s.claimed_by = :token
    FOR UPDATE OF s
), queued AS (
    UPDATE einmal.sends s SET status = 'queued', claimed_by = NULL, updated_at = now()
    FROM released r WHERE s.id = r.id AND s.campaign_id = r.campaign_id
)
SELECT einmal.quota_refund(array_agg(updated_at)) FROM released
