-- one chunk of a campaign's recipient list: the next :size subscribers after
-- address :after along the (account_id, email_lower) index, plus every other copy
-- of the chunk's last address, so that a chunk holds all copies of its
-- addresses; the oldest confirmed subscriber of each address wins. An address
-- already suppressed gets its row in state 'suppressed'. Re-running a chunk
-- adds nothing (ON CONFLICT DO NOTHING). Returns the chunk's upper bound
-- (NULL: nothing left). Every step reads only its chunk, through indexes.
-- A campaign to a segment has the segment's predicate over `s` in place of the
-- marker below (service/segments/compiled.py; without one it stays `true`).
WITH c AS (
    -- the share lock orders a chunk and a cancel: no queued row appears after a cancel
    SELECT id, account_id, list_ids FROM einmal.campaigns
    WHERE id = :campaign_id AND status IN ('sending', 'paused')
    FOR SHARE
), walk AS MATERIALIZED (
    SELECT s.id, s.email, s.email_lower, s.created_at, s.status, s.attributes
    FROM einmal.subscribers s
    WHERE s.account_id = (SELECT account_id FROM c) AND s.email_lower > :after
    ORDER BY s.account_id, s.email_lower
    LIMIT :size
), bound AS (
    SELECT max(email_lower) AS upper FROM walk
), chunk AS (
    SELECT * FROM walk
    UNION  -- the copies of the last address the walk stopped inside
    SELECT s.id, s.email, s.email_lower, s.created_at, s.status, s.attributes
    FROM einmal.subscribers s, bound
    WHERE s.account_id = (SELECT account_id FROM c) AND s.email_lower = bound.upper
), inserted AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status)
    SELECT DISTINCT ON (s.email_lower)
           c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id,
           CASE WHEN EXISTS (SELECT 1 FROM einmal.suppressions x
                             WHERE x.account_id = c.account_id AND x.email_lower = s.email_lower)
                THEN 'suppressed' ELSE 'queued' END
    FROM c, chunk s
    WHERE s.status = 'confirmed'
      -- OFFSET 0 keeps this a probe of the membership index per subscriber, not a join of every list
      AND EXISTS (SELECT 1 FROM einmal.list_members m
                  WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids)
                    AND m.state = 'confirmed' OFFSET 0)
      AND /* segment */ true
    ORDER BY s.email_lower, s.created_at, s.id
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT upper FROM bound) AS upper, (SELECT count(*) FROM inserted) AS inserted
