-- The clicks of campaign :campaign_id (service/campaigns/clicks.py), as einmal.click_counts keeps them (migration
-- 0150): total and unique recipients per link and tag (`link` NULL: every link, the hidden one too; `tag` NULL: both
-- tags); one row with NULL everywhere and 0 counts when it has none. `tracked`: whether the campaign tracks clicks.
SELECT nullif(k.link, -1) AS link, nullif(k.url, '') AS url, nullif(k.tag, '*') AS tag,
       coalesce(k.total, 0) AS total, coalesce(k.recipients, 0) AS recipients,
       (SELECT track_clicks FROM einmal.campaigns WHERE id = :campaign_id) AS tracked
FROM (SELECT 1) AS one
LEFT JOIN einmal.click_counts AS k ON k.campaign_id = :campaign_id AND k.total > 0
ORDER BY k.link NULLS FIRST, k.tag = '*' DESC, k.tag
