-- wake every node: this campaign changed state (payload: the campaign id)
SELECT pg_notify('einmal_campaign', $1::bigint::text)
