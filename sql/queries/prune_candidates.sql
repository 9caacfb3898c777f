-- Campaigns a prune takes (docs/design.md#retention): finished (sent or cancelled) more than :older_than_seconds
-- seconds ago, all or only campaign :campaign_id, not yet pruned, or marked pruned with rows or a partition still
-- there (a prune cut short).
SELECT c.id, c.status, coalesce(c.sent_at, c.updated_at) AS finished_at, c.pruned_at IS NOT NULL AS marked
FROM einmal.campaigns AS c
WHERE c.status IN ('sent', 'cancelled')
  AND c.kind <> 'message'  -- deleted by their own retention (message_prune.sql), not by a partition
  AND coalesce(c.sent_at, c.updated_at) < now() - make_interval(secs => :older_than_seconds)
  AND (:campaign_id::bigint IS NULL OR c.id = :campaign_id)
  AND (c.pruned_at IS NULL OR to_regclass('einmal.sends_c' || c.id) IS NOT NULL
       OR EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = c.id))
ORDER BY c.id
