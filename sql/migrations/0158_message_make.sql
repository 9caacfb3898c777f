-- A transactional message made in one statement (service/messages/messages.py `make`): its row keyed by
-- (account, Idempotency-Key), and only when that is new its subscriber, its campaign and its send row, the
-- nodes told. It was six round trips (BEGIN, the id, the row, the subscriber, the campaign and its send row,
-- COMMIT), each of them waiting its turn on a server busy with a campaign. Returns the message's id and whether
-- it was made now; false: the key's message made before (a maker with the key that had not committed yet is
-- waited for, then found).
CREATE FUNCTION einmal.message_make(account bigint, given_id bigint, given_key text, template_name text,
                                    payload jsonb, honour boolean, spelt text, mailbox text, campaign_name text,
                                    message_subject text, sender text, text_body text, html_body text, wait text)
RETURNS TABLE (message_id bigint, created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint := coalesce(given_id, nextval('einmal.message_ids'));
    made_id bigint;
    recipient bigint;
BEGIN
    INSERT INTO einmal.messages AS m (campaign_id, account_id, idempotency_key, template, data, honour_unsubscribe)
    VALUES (new_id, account, given_key, template_name, payload, honour)
    ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING m.campaign_id INTO made_id;
    IF made_id IS NULL THEN  -- the key's message, committed first
        RETURN QUERY SELECT m.campaign_id, false FROM einmal.messages AS m
                      WHERE m.account_id = account AND m.idempotency_key = given_key;
        RETURN;
    END IF;
    SELECT u.subscriber_id INTO recipient
    FROM einmal.subscriber_upsert(account, spelt, mailbox, NULL::text, NULL::jsonb, wait) AS u;
    -- 'sending' and built from the start, on no list, without the one-click unsubscribe bulk mail needs; its
    -- sources copied, so that a later change of its template changes nothing queued
    INSERT INTO einmal.campaigns (id, account_id, name, subject, from_address, body_text, body_html, list_ids,
                                  kind, status, recipients_built_at, started_at, unsubscribe_required)
    OVERRIDING SYSTEM VALUE
    VALUES (new_id, account, campaign_name, message_subject, sender, text_body, html_body, '{}',
            'message', 'sending', now(), now(), false);
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
    VALUES (new_id, account, recipient, spelt, mailbox, 'campaign:' || new_id || ':' || recipient);
    PERFORM pg_notify('einmal_message', account::text);  -- its claimer claims the account's messages at once
    RETURN QUERY SELECT new_id, true;
END
$$;
