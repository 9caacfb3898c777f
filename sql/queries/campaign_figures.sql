-- The figures since its last resume of each campaign being sent (:campaign_id: that one only; NULL: all), for its
-- self-pause (service/campaigns/self_pause.py): one row per campaign with counts, summed over its few sources.
SELECT k.campaign_id, sum(k.delivered)::bigint AS delivered, sum(k.refused)::bigint AS refused,
       sum(k.rejected)::bigint AS rejected, sum(k.bounced)::bigint AS bounced,
       sum(k.complained)::bigint AS complained
FROM einmal.campaigns c JOIN einmal.campaign_tallies k ON k.campaign_id = c.id
WHERE c.status = 'sending' AND c.kind <> 'message' AND (:campaign_id::bigint IS NULL OR c.id = :campaign_id)
GROUP BY k.campaign_id
