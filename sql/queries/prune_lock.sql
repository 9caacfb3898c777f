-- Campaign :campaign_id as a prune finds it, under its row's lock (a finish, retry or reconcile waits): its status,
-- whether rows are still open (two probes of partial indexes), and whether the counts kept when it finished
-- can stand (only an in-doubt row may change after a finish: a late answer, reconcile --mark-sent).
SELECT c.id, c.status, c.pruned_at,
       EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = c.id AND s.status = 'queued')
       OR EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = c.id AND s.status IN ('claimed', 'sending'))
           AS open,
       EXISTS (SELECT 1 FROM einmal.campaign_counts k WHERE k.campaign_id = c.id)
       AND NOT EXISTS (SELECT 1 FROM einmal.campaign_counts k WHERE k.campaign_id = c.id AND k.status = 'in_doubt')
           AS counted
FROM einmal.campaigns AS c
WHERE c.id = :campaign_id
FOR UPDATE OF c
