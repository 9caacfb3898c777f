-- campaigns being sent, interleaved so that accounts take turns
SELECT id, account_id, recipients_built_at IS NOT NULL AS built
FROM einmal.campaigns
WHERE status = 'sending' AND kind <> 'message'  -- messages are claimed apart (docs/design.md#messages)
ORDER BY row_number() OVER (PARTITION BY account_id ORDER BY id), account_id
