-- The opens of campaign :campaign_id (service/campaigns/opens.py): total and unique recipients per tag (`tag`
-- NULL: both); one row with NULL everywhere and 0 counts when it has none. `tracked`: whether it tracks opens.
SELECT o.tag, count(*) AS total, count(DISTINCT o.subscriber_id) AS recipients,
       (SELECT track_opens FROM einmal.campaigns WHERE id = :campaign_id) AS tracked
FROM einmal.opens AS o
WHERE o.campaign_id = :campaign_id
GROUP BY GROUPING SETS ((o.tag), ())
ORDER BY o.tag NULLS FIRST
