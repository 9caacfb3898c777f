-- CAS sending -> sent once recipients are built and nothing is left to send; what its rows came to is kept
-- (einmal.campaign_counts), so that a later prune drops them without reading them (docs/design.md#retention); with
-- the rows left in doubt, which only an operator can settle (einmal reconcile)
WITH finished AS (
    UPDATE einmal.campaigns c SET status = 'sent', sent_at = now(), updated_at = now()
    WHERE c.id = :campaign_id AND c.status = 'sending' AND c.recipients_built_at IS NOT NULL
      AND c.kind = 'campaign'  -- a list's confirmations go on while the list exists (0100_double_optin.sql)
      -- two probes, each of a partial index (sends_claimable, sends_held): rows still open are few
      AND NOT EXISTS (SELECT 1 FROM einmal.sends s WHERE s.campaign_id = c.id AND s.status = 'queued')
      AND NOT EXISTS (SELECT 1 FROM einmal.sends s
                      WHERE s.campaign_id = c.id AND s.status IN ('claimed', 'sending'))
    RETURNING c.id
), counted AS (
    INSERT INTO einmal.campaign_counts (campaign_id, status, n)
    SELECT s.campaign_id, s.status, count(*) FROM einmal.sends s
    WHERE s.campaign_id = :campaign_id AND EXISTS (SELECT 1 FROM finished)
    GROUP BY s.campaign_id, s.status
    ON CONFLICT (campaign_id, status) DO UPDATE SET n = EXCLUDED.n
)
SELECT id, pg_notify('einmal_campaign', id::text),
       (SELECT count(*) FROM einmal.sends s WHERE s.campaign_id = :campaign_id AND s.status = 'in_doubt') AS in_doubt
FROM finished
