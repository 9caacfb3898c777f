-- The opens of campaign :campaign_id (service/campaigns/opens.py), from its counts (einmal.open_counts, migration
-- 0157): total and unique recipients of both tags (`tag` NULL) first, then of each tag it has opens of; the first
-- row has 0 counts when it has none. `tracked`: whether it tracks opens (NULL: no such campaign).
SELECT NULL::text AS tag, coalesce(max(n.total) FILTER (WHERE n.tag = '*'), 0)::bigint AS total,
       coalesce(max(n.recipients) FILTER (WHERE n.tag = '*'), 0)::bigint AS recipients,
       (SELECT track_opens FROM einmal.campaigns WHERE id = :campaign_id) AS tracked
FROM einmal.open_counts AS n
WHERE n.campaign_id = :campaign_id
UNION ALL
SELECT n.tag, n.total, n.recipients, NULL
FROM einmal.open_counts AS n
WHERE n.campaign_id = :campaign_id AND n.tag <> '*' AND n.total > 0
ORDER BY tag NULLS FIRST
