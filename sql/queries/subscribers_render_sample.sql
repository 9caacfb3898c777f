-- Up to :sample subscribers of campaign :campaign_id's lists, picked at random: the trial render of `campaign create`
-- and `campaign approve` (service/campaigns/preview.py).
SELECT s.id, s.email, s.name, s.attributes
FROM einmal.campaigns AS c
JOIN einmal.subscribers AS s ON s.account_id = c.account_id
WHERE c.id = :campaign_id
  AND EXISTS (SELECT 1 FROM einmal.list_members m WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
ORDER BY random()
LIMIT :sample
