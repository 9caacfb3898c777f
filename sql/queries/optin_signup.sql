-- A sign-up of subscriber :subscriber_id (mailbox key :email_key, spelt :email) to list :list_id, whose confirmation
-- campaign is :campaign_id: an 'unconfirmed' membership unless it has one (a confirmed one stays confirmed), with
-- where it came from (:source) and the wording of its message (:wording); and, while that membership is unconfirmed,
-- the address is not suppressed, fewer than :address_limit confirmations went to it from this account in the last
-- :address_seconds seconds and the list is under its hourly bound (:under_list_limit, counted by the caller in
-- einmal.client_counts), the one send row of its confirmation, ON CONFLICT DO NOTHING: a second sign-up, a retry or
-- a double submit adds none (UNIQUE (campaign_id, subscriber_id) and (campaign_id, email_lower)). A row added wakes
-- the nodes' claimers (einmal_queued: the campaign, always sending, is no scheduler's business). Returns whether a
-- row was queued (for the log and the list's count, never for the answer).
WITH c AS (
    SELECT id, account_id FROM einmal.campaigns WHERE id = :campaign_id AND kind = 'confirmation'
), member AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id, state, source, wording)
    VALUES (:list_id, :subscriber_id, 'unconfirmed', :source, :wording)
    ON CONFLICT (list_id, subscriber_id) DO NOTHING
    RETURNING state
), state AS (
    SELECT state FROM member
    UNION ALL
    SELECT state FROM einmal.list_members WHERE list_id = :list_id AND subscriber_id = :subscriber_id
    LIMIT 1
), queued AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
    SELECT c.id, c.account_id, :subscriber_id, :email, :email_key, 'campaign:' || c.id || ':' || :subscriber_id
    FROM c, state
    WHERE state.state = 'unconfirmed' AND :under_list_limit::boolean
      AND NOT EXISTS (SELECT 1 FROM einmal.suppressions x
                      WHERE x.account_id = c.account_id AND x.email_lower = :email_key)
      AND (SELECT count(*) FROM einmal.campaigns k JOIN einmal.sends s ON s.campaign_id = k.id
           WHERE k.account_id = c.account_id AND k.kind = 'confirmation' AND s.email_lower = :email_key
             AND s.created_at > now() - make_interval(secs => :address_seconds)) < :address_limit
    ON CONFLICT DO NOTHING
    RETURNING campaign_id
)
SELECT EXISTS (SELECT 1 FROM queued) AS queued,
       (SELECT pg_notify('einmal_queued', campaign_id::text) FROM queued) IS NOT NULL AS woke
