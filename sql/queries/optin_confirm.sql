-- Confirm the membership that the token (account $1, confirmation campaign $2, subscriber $3) names, still
-- unconfirmed and signed up less than $6 seconds ago, with the consent record: now, address $4, user agent
-- $5. One row: 'confirmed' (now), 'already' (a repeat: nothing changes), 'expired' (no such sign-up, or too old).
WITH target AS (
    SELECT m.list_id, m.subscriber_id, m.state, m.created_at
    FROM einmal.campaigns AS c
    JOIN einmal.list_members AS m ON m.list_id = c.list_ids[1] AND m.subscriber_id = $3
    WHERE c.id = $2 AND c.account_id = $1 AND c.kind = 'confirmation'
    FOR UPDATE OF m
), confirmed AS (
    UPDATE einmal.list_members AS m
    SET state = 'confirmed', confirmed_at = now(), confirmed_ip = $4::inet, confirmed_agent = $5
    FROM target AS t
    WHERE m.list_id = t.list_id AND m.subscriber_id = t.subscriber_id
      AND t.state = 'unconfirmed' AND t.created_at > now() - make_interval(secs => $6)
    RETURNING 1
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM confirmed) THEN 'confirmed'
            WHEN (SELECT state FROM target) = 'confirmed' THEN 'already'
            ELSE 'expired' END AS result
