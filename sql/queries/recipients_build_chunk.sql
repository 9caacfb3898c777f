-- one chunk of a campaign's recipient list: the addresses after $2 up to the
-- one $3 eligible subscribers further, every copy of each address inside the
-- chunk, the oldest confirmed subscriber of each address winning. An address
-- already suppressed gets its row in state 'suppressed'. Re-running a chunk
-- adds nothing (ON CONFLICT DO NOTHING). Returns the chunk's upper bound.
WITH c AS (
    -- the share lock orders a chunk and a cancel: no queued row appears after a cancel
    SELECT id, account_id, list_ids FROM einmal.campaigns
    WHERE id = $1 AND status IN ('sending', 'paused')
    FOR SHARE
), bound AS (
    SELECT max(email_lower) AS upper FROM (
        SELECT s.email_lower
        FROM c JOIN einmal.subscribers s ON s.account_id = c.account_id
        WHERE s.email_lower > $2 AND s.status = 'confirmed'
          AND EXISTS (SELECT 1 FROM einmal.list_members m
                      WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
        ORDER BY s.email_lower
        LIMIT $3
    ) chunk
), inserted AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)
    SELECT DISTINCT ON (s.email_lower)
           c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id,
           CASE WHEN EXISTS (SELECT 1 FROM einmal.suppressions x
                             WHERE x.account_id = c.account_id AND x.email_lower = s.email_lower)
                THEN 'suppressed' ELSE 'queued' END
    FROM c JOIN einmal.subscribers s ON s.account_id = c.account_id, bound
    WHERE s.email_lower > $2 AND s.email_lower <= bound.upper AND s.status = 'confirmed'
      AND EXISTS (SELECT 1 FROM einmal.list_members m
                  WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
    ORDER BY s.email_lower, s.created_at, s.id
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT upper FROM bound) AS upper, (SELECT count(*) FROM inserted) AS inserted
