-- CAS: campaign :campaign_id is pruned from now on (its status, list line and metrics read einmal.campaign_counts);
-- returns the rows its counts hold
WITH marked AS (
    UPDATE einmal.campaigns SET pruned_at = now()
    WHERE id = :campaign_id AND status IN ('sent', 'cancelled') AND pruned_at IS NULL
    RETURNING id
)
SELECT (SELECT count(*) FROM marked) AS marked,
       (SELECT coalesce(sum(n), 0)::bigint FROM einmal.campaign_counts WHERE campaign_id = :campaign_id) AS n
