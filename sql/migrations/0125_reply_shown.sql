-- What an account is shown of a reply in its webhook events (docs/operations/security.md, "What an account
-- sees of the relays"): as over the API (service/accounts/replies.py, which tests/web/test_api_replies.py holds
-- to this function), an account without relays of its own gets a reply's codes and einmal's own words, never
-- the installation's relay's name or words.
CREATE FUNCTION einmal.reply_shown(reply text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN reply ~ '^\s*[2-5][0-9][0-9]([ -]|$)' THEN
            left(btrim(reply), 3)
            || coalesce(' ' || substring(substring(reply from 5) from '\m[245]\.[0-9]{1,3}\.[0-9]{1,3}\M'), '')
            || coalesce(substring(reply from ' \(gave up after [0-9]+ attempts\)$'), '')
        ELSE regexp_replace(
            regexp_replace(reply, 'SMTP [^:\n]{1,200}: .*', 'the relay could not be reached'),
            '(reply to end of DATA: )\s*([2-5][0-9][0-9]).*', '\1\2')
    END
$$;

-- The trigger of 0115, its failed rows' reply as the account is shown it; otherwise unchanged.
CREATE OR REPLACE FUNCTION einmal.webhook_sends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(n.account_id,
                   CASE WHEN c.kind = 'step' AND n.status = 'sent' THEN 'sequence.step_sent'
                        ELSE 'message.' || n.status END,
                   n.email_lower,
                   jsonb_build_object('campaign_id', n.campaign_id, 'subscriber_id', n.subscriber_id,
                                      'email', n.email, 'status', n.status, 'at', n.updated_at)
                   || CASE WHEN n.status = 'failed' THEN jsonb_build_object('reply',
                          CASE WHEN EXISTS (SELECT 1 FROM einmal.account_relays ar WHERE ar.account_id = n.account_id)
                               THEN n.last_reply ELSE einmal.reply_shown(n.last_reply) END)
                           ELSE '{}'::jsonb END
                   || CASE WHEN c.kind = 'message' THEN jsonb_build_object('message_id', n.campaign_id)
                           WHEN c.kind = 'step' THEN jsonb_build_object('sequence_id', c.sequence_id,
                                                                        'position', c.step_position)
                           ELSE '{}'::jsonb END)::einmal.webhook_new_event
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id AND o.campaign_id = n.campaign_id
        JOIN einmal.campaigns c ON c.id = n.campaign_id AND c.kind IN ('campaign', 'message', 'step')
        WHERE n.status IN ('sent', 'failed') AND o.status IS DISTINCT FROM n.status
          AND EXISTS (SELECT 1 FROM einmal.webhook_endpoints w WHERE w.account_id = n.account_id AND w.disabled_at IS NULL)
        ORDER BY n.id));
    RETURN NULL;
END $$;
