-- one chunk of a campaign's recipient list: the next :size subscribers after
-- address :after along the (account_id, email_lower) index, plus every other copy
-- of the chunk's last address, so that a chunk holds all copies of its
-- addresses; the oldest confirmed subscriber of each address wins. An address
-- already suppressed gets its row in state 'suppressed'. Re-running a chunk
-- adds nothing (ON CONFLICT DO NOTHING). Returns the chunk's upper bound
-- (NULL: nothing left). Every step reads only its chunk, through indexes.
-- A campaign to a segment has the segment's predicate over `s` in place of the
-- marker below (service/segments/compiled.py; without one it stays `true`).
-- A campaign with a local time gives each row its not-before (next_attempt_at): the first moment from the
-- campaign's start at which the clock shows that time in the subscriber's `time_zone` attribute, when
-- PostgreSQL knows the name, else in the account's time zone; the rows that fell back so for a name it does
-- not know are counted (einmal.local_time_fallbacks, migration 0145).
WITH c AS (
    -- the share lock orders a chunk and a cancel: no queued row appears after a cancel
    SELECT id, account_id, list_ids, local_time, coalesce(started_at, now()) AS started_at,
           (SELECT a.time_zone FROM einmal.accounts AS a WHERE a.id = campaigns.account_id) AS time_zone
    FROM einmal.campaigns
    WHERE id = :campaign_id AND status IN ('sending', 'paused')
    FOR SHARE
), zones AS MATERIALIZED (
    -- the zones PostgreSQL knows, read once per chunk, and only for a campaign with a local time
    SELECT name FROM pg_timezone_names WHERE (SELECT local_time FROM c) IS NOT NULL
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
), placed AS (
    SELECT s.*, s.attributes ->> 'time_zone' AS given_zone,
           CASE WHEN s.attributes ->> 'time_zone' IN (SELECT name FROM zones) THEN s.attributes ->> 'time_zone' END
               AS own_zone
    FROM chunk AS s
), inserted AS (
    INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status,
                              next_attempt_at)
    SELECT DISTINCT ON (s.email_lower)
           c.id, c.account_id, s.id, s.email, s.email_lower, 'campaign:' || c.id || ':' || s.id,
           CASE WHEN EXISTS (SELECT 1 FROM einmal.suppressions x
                             WHERE x.account_id = c.account_id AND x.email_lower = s.email_lower)
                THEN 'suppressed' ELSE 'queued' END,
           CASE WHEN c.local_time IS NULL THEN '-infinity'
                ELSE einmal.local_time_next(c.local_time, coalesce(s.own_zone, c.time_zone), c.started_at) END
    FROM c, placed s
    WHERE s.status = 'confirmed'
      -- OFFSET 0 keeps this a probe of the membership index per subscriber, not a join of every list
      AND EXISTS (SELECT 1 FROM einmal.list_members m
                  WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids)
                    AND m.state = 'confirmed' OFFSET 0)
      AND /* segment */ true
    ORDER BY s.email_lower, s.created_at, s.id
    ON CONFLICT DO NOTHING
    RETURNING subscriber_id
), fell_back AS (
    INSERT INTO einmal.local_time_fallbacks AS f (campaign_id, n)
    SELECT (SELECT id FROM c), count(*)
    FROM inserted AS i JOIN placed AS s ON s.id = i.subscriber_id
    WHERE s.given_zone IS NOT NULL AND s.own_zone IS NULL AND (SELECT local_time FROM c) IS NOT NULL
    HAVING count(*) > 0
    ON CONFLICT (campaign_id) DO UPDATE SET n = f.n + excluded.n
)
SELECT (SELECT upper FROM bound) AS upper, (SELECT count(*) FROM inserted) AS inserted
