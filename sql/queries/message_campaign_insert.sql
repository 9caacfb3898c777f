-- the campaign :campaign_id of account :account_id's message, of kind 'message': 'sending' and built from the
-- start, on no list, without the one-click unsubscribe bulk mail needs; its sources copied (:subject, :from_address,
-- :body_text, :body_html) so that a later change of its template changes nothing queued. Then its one send row,
-- to subscriber :subscriber_id (:email, mailbox key :email_key), in einmal.sends_messages; and the nodes woken,
-- told the account (its claimer claims that account's messages without looking for them).
WITH made AS (
    INSERT INTO einmal.campaigns (id, account_id, name, subject, from_address, body_text, body_html, list_ids,
                                  kind, status, recipients_built_at, started_at, unsubscribe_required)
    OVERRIDING SYSTEM VALUE
    VALUES (:campaign_id::bigint, :account_id::bigint, :campaign_name, :subject, :from_address, :body_text, :body_html, '{}',
            'message', 'sending', now(), now(), false)
    RETURNING id, account_id
), queued AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
    SELECT id, account_id, :subscriber_id::bigint, :email, :email_key, 'campaign:' || id || ':' || :subscriber_id::bigint
    FROM made
    RETURNING campaign_id, account_id
)
SELECT campaign_id, pg_notify('einmal_message', account_id::text) FROM queued
