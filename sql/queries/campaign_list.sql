-- Campaigns, newest first, all or those in status :status; with their account and send-row total (a pruned
-- campaign's: what its rows came to, einmal.campaign_counts), when each started (NULL: not yet) and when it is
-- scheduled for (a time later than its creation: given with --at), and its rows in doubt (for einmal reconcile).
SELECT c.id, a.name AS account, c.name, c.status, c.started_at, c.pause_reason, c.unsubscribe_required,
       CASE WHEN c.scheduled_for > c.created_at THEN c.scheduled_for END AS scheduled_for,
       CASE WHEN c.pruned_at IS NULL THEN (SELECT count(*) FROM einmal.sends s WHERE s.campaign_id = c.id)
            ELSE (SELECT coalesce(sum(k.n), 0) FROM einmal.campaign_counts k WHERE k.campaign_id = c.id)
       END AS recipients,
       CASE WHEN c.pruned_at IS NULL
            THEN (SELECT count(*) FROM einmal.sends s WHERE s.campaign_id = c.id AND s.status = 'in_doubt')
            ELSE (SELECT coalesce(sum(k.n), 0) FROM einmal.campaign_counts k
                  WHERE k.campaign_id = c.id AND k.status = 'in_doubt')
       END AS in_doubt
FROM einmal.campaigns AS c JOIN einmal.accounts AS a ON a.id = c.account_id
WHERE (:status::text IS NULL OR c.status = :status::text) AND c.kind = 'campaign'  -- not a list's confirmations
ORDER BY c.id DESC
