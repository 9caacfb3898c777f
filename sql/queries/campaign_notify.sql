-- wake every node: this campaign changed state (payload: the campaign id)
SELECT pg_notify('einmal_campaign', :campaign_id::bigint::text)
