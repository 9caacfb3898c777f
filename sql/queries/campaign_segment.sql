-- What the recipient build of campaign :campaign_id needs to compile its segment's predicate: its account, the
-- rule it was made with (NULL: its lists alone) and when it started (`received.last` counts the campaigns
-- started before it; `within_days` counts back from it).
SELECT account_id, segment_rule, coalesce(started_at, now()) AS started_at FROM einmal.campaigns
WHERE id = :campaign_id
