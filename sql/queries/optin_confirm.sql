-- Confirm the membership that the token (account :account_id, confirmation campaign :campaign_id, subscriber
-- :subscriber_id) names, still unconfirmed and signed up less than :window_seconds seconds ago, with the consent
-- record: now, address :ip, user agent :agent. One row: 'confirmed' (now), 'already' (a repeat: nothing changes),
-- 'expired' (no such sign-up, or too old).
WITH target AS (
    SELECT m.list_id, m.subscriber_id, m.state, m.created_at
    FROM einmal.campaigns AS c
    JOIN einmal.list_members AS m ON m.list_id = c.list_ids[1] AND m.subscriber_id = :subscriber_id
    WHERE c.id = :campaign_id AND c.account_id = :account_id AND c.kind = 'confirmation'
    FOR UPDATE OF m
), confirmed AS (
    UPDATE einmal.list_members AS m
    SET state = 'confirmed', confirmed_at = now(), confirmed_ip = :ip::inet, confirmed_agent = :agent
    FROM target AS t
    WHERE m.list_id = t.list_id AND m.subscriber_id = t.subscriber_id
      AND t.state = 'unconfirmed' AND t.created_at > now() - make_interval(secs => :window_seconds)
    RETURNING 1
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM confirmed) THEN 'confirmed'
            WHEN (SELECT state FROM target) = 'confirmed' THEN 'already'
            ELSE 'expired' END AS result
