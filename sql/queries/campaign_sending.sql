-- campaigns being sent, interleaved so that accounts take turns; updated_at: a change of the campaign since a
-- node compiled it (a sequence's step edited while it sends) makes the node compile it anew; finishes: a
-- campaign's kind that is ever done (campaign_finish.sql), not a list's confirmations or a sequence's step
SELECT id, account_id, recipients_built_at IS NOT NULL AS built, updated_at, kind = 'campaign' AS finishes
FROM einmal.campaigns
WHERE status = 'sending' AND kind <> 'message'  -- messages are claimed apart (docs/design.md#messages)
ORDER BY row_number() OVER (PARTITION BY account_id ORDER BY id), account_id
