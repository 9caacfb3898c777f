-- Up to :batch sign-ups unconfirmed for longer than :window_seconds seconds go, with their confirmation's send row
-- unless a node holds it or its outcome is in doubt (claimed, sending, in_doubt: those stay, and keep a new sign-up
-- of the address from a second message until they are settled). A sign-up after this is a new one: it gets a new
-- confirmation. Returns how many memberships and send rows went.
WITH gone AS (
    DELETE FROM einmal.list_members AS m
    WHERE (m.list_id, m.subscriber_id) IN (
        SELECT list_id, subscriber_id FROM einmal.list_members
        WHERE state = 'unconfirmed' AND created_at < now() - make_interval(secs => :window_seconds)
        ORDER BY created_at LIMIT :batch
        FOR UPDATE SKIP LOCKED)
      AND m.state = 'unconfirmed'
    RETURNING m.list_id, m.subscriber_id
), rows AS (
    DELETE FROM einmal.sends AS s
    USING einmal.campaigns AS c, gone AS g
    WHERE c.kind = 'confirmation' AND c.list_ids[1] = g.list_id
      AND s.campaign_id = c.id AND s.subscriber_id = g.subscriber_id
      AND s.status IN ('queued', 'sent', 'failed', 'suppressed')
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS members, (SELECT count(*) FROM rows) AS rows
