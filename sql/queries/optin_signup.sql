-- A sign-up of subscriber $2 (mailbox key $5, spelt $4) to list $1, whose confirmation campaign is $3:
-- an 'unconfirmed' membership unless it has one (a confirmed one stays confirmed), with where it came
-- from ($6) and the wording of its message ($7); and, while that membership is unconfirmed, the address
-- is not suppressed, fewer than $8 confirmations went to it from this account in the last $9 seconds and
-- the list is under its hourly bound ($10, counted by the caller in einmal.client_counts), the one send
-- row of its confirmation, ON CONFLICT DO NOTHING: a second sign-up, a retry or a double submit adds none
-- (UNIQUE (campaign_id, subscriber_id) and (campaign_id, email_lower)). A row added wakes the nodes.
-- Returns whether a row was queued (for the log and the list's count, never for the answer).
WITH c AS (
    SELECT id, account_id FROM einmal.campaigns WHERE id = $3 AND kind = 'confirmation'
), member AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id, state, source, wording)
    VALUES ($1, $2, 'unconfirmed', $6, $7)
    ON CONFLICT (list_id, subscriber_id) DO NOTHING
    RETURNING state
), state AS (
    SELECT state FROM member
    UNION ALL
    SELECT state FROM einmal.list_members WHERE list_id = $1 AND subscriber_id = $2
    LIMIT 1
), queued AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id)
    SELECT c.id, c.account_id, $2, $4, $5, 'campaign:' || c.id || ':' || $2
    FROM c, state
    WHERE state.state = 'unconfirmed' AND $10::boolean
      AND NOT EXISTS (SELECT 1 FROM einmal.suppressions x WHERE x.account_id = c.account_id AND x.email_lower = $5)
      AND (SELECT count(*) FROM einmal.campaigns k JOIN einmal.sends s ON s.campaign_id = k.id
           WHERE k.account_id = c.account_id AND k.kind = 'confirmation' AND s.email_lower = $5
             AND s.created_at > now() - make_interval(secs => $9)) < $8
    ON CONFLICT DO NOTHING
    RETURNING campaign_id
)
SELECT EXISTS (SELECT 1 FROM queued) AS queued,
       (SELECT pg_notify('einmal_campaign', campaign_id::text) FROM queued) IS NOT NULL AS woke
