-- Campaigns a prune takes (docs/design.md#retention): finished (sent or cancelled) more than $1 seconds ago, all or
-- only campaign $2, not yet pruned, or marked pruned with rows or a partition still there (a prune cut short).
SELECT c.id, c.status, coalesce(c.sent_at, c.updated_at) AS finished_at, c.pruned_at IS NOT NULL AS marked
FROM einmal.campaigns AS c
WHERE c.status IN ('sent', 'cancelled')
  AND coalesce(c.sent_at, c.updated_at) < now() - make_interval(secs => $1)
  AND ($2::bigint IS NULL OR c.id = $2)
  AND (c.pruned_at IS NULL OR to_regclass('einmal.sends_c' || c.id) IS NOT NULL
       OR EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = c.id))
ORDER BY c.id
