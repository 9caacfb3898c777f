-- A hard bounce for an address reason ($2 = 1) or a complaint ($3 = 1) about send row $1 of campaign $4,
-- added to its campaign's counts (service/health.py) in the transaction that records it; not when the message went
-- out before the campaign's last resume, since which the campaign is judged. Returns the campaign.
INSERT INTO einmal.campaign_tallies AS k (campaign_id, source, bounced, complained)
SELECT s.campaign_id, 'inbound', $2, $3 FROM einmal.sends s
WHERE s.campaign_id = $4 AND s.id = $1  -- the campaign: one partition read (docs/design.md#retention)
  AND NOT EXISTS (SELECT 1 FROM einmal.campaign_tallies r
                  WHERE r.campaign_id = s.campaign_id AND r.source = 'resumed' AND s.sent_at < r.since)
ON CONFLICT (campaign_id, source) DO UPDATE SET bounced = k.bounced + EXCLUDED.bounced,
    complained = k.complained + EXCLUDED.complained
RETURNING campaign_id
