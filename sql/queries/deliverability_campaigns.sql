-- Account :account_id's campaigns (sequence steps too, not messages) that may have delivered since :since: those
-- sending or paused (`live`: counted from their send rows at each reading), and those that ended since (sent or
-- cancelled), with whether their days are counted already (einmal.campaign_days).
SELECT c.id, c.status IN ('sending', 'paused') AS live,
       EXISTS (SELECT 1 FROM einmal.campaign_days d WHERE d.campaign_id = c.id AND d.day = '-infinity') AS counted
FROM einmal.campaigns c
WHERE c.account_id = :account_id AND c.kind <> 'message'
  AND (c.status IN ('sending', 'paused')
       OR (c.status IN ('sent', 'cancelled') AND coalesce(c.sent_at, c.updated_at) >= :since))
