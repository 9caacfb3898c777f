-- A hard bounce for an address reason (:bounced = 1) or a complaint (:complained = 1) about send row :send_id of
-- campaign :campaign_id, added to its campaign's counts (service/health.py) in the transaction that records it; not
-- when the message went out before the campaign's last resume, since which the campaign is judged. Returns the
-- campaign.
INSERT INTO einmal.campaign_tallies AS k (campaign_id, source, bounced, complained)
SELECT s.campaign_id, 'inbound', :bounced, :complained FROM einmal.sends s
WHERE s.campaign_id = :campaign_id AND s.id = :send_id  -- the campaign: one partition read (docs/design.md#retention)
  AND NOT EXISTS (SELECT 1 FROM einmal.campaign_tallies r
                  WHERE r.campaign_id = s.campaign_id AND r.source = 'resumed' AND s.sent_at < r.since)
ON CONFLICT (campaign_id, source) DO UPDATE SET bounced = k.bounced + EXCLUDED.bounced,
    complained = k.complained + EXCLUDED.complained
RETURNING campaign_id
