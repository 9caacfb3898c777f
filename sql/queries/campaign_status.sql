-- The campaign, its send rows counted per state, and the send rows that came back as a hard bounce,
-- a soft bounce, an unclassified bounce or a complaint (einmal.bounces), and per reason, in one snapshot.
-- A pruned campaign's counts are those kept in einmal.campaign_counts (docs/design.md#retention).
-- With its schedule and start, the database's clock (now) to say how long until the start, and how many
-- nodes are alive (a heartbeat younger than :node_timeout seconds, EINMAL_NODE_TIMEOUT_SECONDS): none means nothing sends.
-- Its recipients' one-click unsubscribes (the link's events, inbound_events_prefix), and for a campaign not
-- started yet an estimate of its recipients: the mailboxes the build would take now (confirmed members of its
-- lists, confirmed, not suppressed; recipients_build_chunk.sql).
-- A campaign with a local time: its rows queued for their first attempt whose time has not come (read from the
-- partial index sends_claimable), the next one's time, and the rows given the account's time zone because the
-- subscriber's `time_zone` attribute named no zone PostgreSQL knows.
-- No row when the campaign is unknown; one row with NULL send_status when it has no send rows.
SELECT c.id, c.name, c.status, c.pause_reason, c.started_at, now() AS now, c.unsubscribe_required,
       to_char(c.local_time, 'HH24:MI') AS local_time, w.waiting, w.next_due,
       coalesce((SELECT f.n FROM einmal.local_time_fallbacks AS f WHERE f.campaign_id = c.id), 0) AS zone_fallbacks,
       -- a draft given no time has none: it starts when approved (the column holds its creation time)
       CASE WHEN c.status = 'draft' AND c.scheduled_for <= c.created_at THEN NULL ELSE c.scheduled_for END
           AS scheduled_for,
       (SELECT count(*) FROM einmal.nodes AS x WHERE x.heartbeat_at >= now() - make_interval(secs => :node_timeout)) AS nodes,
       s.send_status, coalesce(s.n, 0) AS n,
       b.bounced, b.soft_bounced, b.unclassified, b.complained, r.reasons, u.unsubscribed, e.estimate
FROM einmal.campaigns AS c
LEFT JOIN LATERAL (
    -- a row the cancel settled is `failed` with the reply 'campaign cancelled' (sends_cancel.sql): counted apart
    SELECT CASE WHEN status = 'failed' AND last_reply = 'campaign cancelled' THEN 'cancelled' ELSE status END
               AS send_status, count(*) AS n
    FROM einmal.sends
    WHERE campaign_id = c.id AND c.pruned_at IS NULL
    GROUP BY 1
    UNION ALL  -- a pruned campaign's rows are gone: what they came to (einmal.campaign_counts, by stored status)
    SELECT k.status, k.n FROM einmal.campaign_counts AS k WHERE k.campaign_id = c.id AND c.pruned_at IS NOT NULL
) AS s ON true
CROSS JOIN LATERAL (
    SELECT count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'hard') AS bounced,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'soft') AS soft_bounced,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'unclassified') AS unclassified,
           count(DISTINCT bo.send_id) FILTER (WHERE bo.kind = 'complaint') AS complained
    FROM einmal.bounces AS bo
    WHERE bo.campaign_id = c.id  -- kept when the campaign's send rows are pruned
) AS b
CROSS JOIN LATERAL (  -- send rows per reason (service/smtp/reasons.py); rows written before 0030 have none
    SELECT coalesce(jsonb_object_agg(per.reason, per.n), '{}')::text AS reasons
    FROM (SELECT bo.reason, count(DISTINCT bo.send_id) AS n
          FROM einmal.bounces AS bo
          WHERE bo.campaign_id = c.id AND bo.reason IS NOT NULL
          GROUP BY bo.reason) AS per
) AS r
CROSS JOIN LATERAL (
    SELECT count(*) AS unsubscribed FROM einmal.inbound_events AS ev
    WHERE ev.event_id ~>=~ ('unsubscribe:' || c.account_id || '.' || c.id || '.')
      AND ev.event_id ~<~ ('unsubscribe:' || c.account_id || '.' || c.id || '/')
) AS u
CROSS JOIN LATERAL (
    SELECT count(DISTINCT sub.email_lower) AS estimate
    FROM einmal.list_members AS m JOIN einmal.subscribers AS sub ON sub.id = m.subscriber_id
    WHERE c.status IN ('draft', 'approved') AND m.list_id = ANY (c.list_ids) AND m.state = 'confirmed'
      AND sub.status = 'confirmed'
      AND NOT EXISTS (SELECT 1 FROM einmal.suppressions AS x
                      WHERE x.account_id = sub.account_id AND x.email_lower = sub.email_lower)
) AS e
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting, min(q.next_attempt_at) AS next_due
    FROM einmal.sends AS q
    WHERE q.campaign_id = c.id AND c.local_time IS NOT NULL AND c.pruned_at IS NULL
      AND q.status = 'queued' AND q.next_attempt_at > now() AND q.attempts = 0
) AS w
WHERE c.id = :campaign_id
