-- The clicks of campaign :campaign_id (service/campaigns/clicks.py): total and unique recipients per link and tag
-- (`link` NULL: every link, the hidden one too; `tag` NULL: both tags); one row with NULL everywhere and 0 counts
-- when it has none. `tracked`: whether the campaign tracks clicks.
SELECT k.link, k.url, k.tag, count(*) AS total, count(DISTINCT k.subscriber_id) AS recipients,
       (SELECT track_clicks FROM einmal.campaigns WHERE id = :campaign_id) AS tracked
FROM einmal.clicks AS k
WHERE k.campaign_id = :campaign_id
GROUP BY GROUPING SETS ((k.link, k.url, k.tag), (k.link, k.url), (k.tag), ())
ORDER BY k.link NULLS FIRST, k.tag NULLS FIRST
