-- Engagement (docs/design.md#engagement): what a campaign's, a sequence step's and a message template's messages
-- met, and each subscriber's last activity, kept as counts written in the transaction of each change, so that
-- reading them costs a few rows whatever the number of send rows.
--
-- einmal.engagement: a subject's counts, one row per (subject, source) so that no two writers share a row (as
-- einmal.campaign_tallies). A subject is 'campaign:<id>' (a campaign, or a sequence's step, which is a campaign)
-- or 'template:<name>' (the messages made from the account's stored template <name>; 'template:' those made from
-- inline sources). Sources:
--   a writer's claim token: delivered and rejected (failed at send time for an address reason) of the messages of
--     a template, added by its group statement (send_advance.sql); a campaign's are campaign_tallies' already;
--   'inbound': bounced (hard) and complained, by the trigger below on einmal.bounces;
--   'unsubscribe': one-click unsubscribes, by the trigger below on einmal.inbound_events.
-- Opens, when they are tracked, join as columns of their own, added by their recorder as clicks are.
CREATE TABLE einmal.engagement (
    account_id   bigint NOT NULL REFERENCES einmal.accounts (id),
    subject      text NOT NULL CHECK (subject ~ '^(campaign:[0-9]+|template:.*)$'),
    source       text NOT NULL,
    delivered    bigint NOT NULL DEFAULT 0,
    rejected     bigint NOT NULL DEFAULT 0,
    bounced      bigint NOT NULL DEFAULT 0,
    complained   bigint NOT NULL DEFAULT 0,
    unsubscribed bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, subject, source)
);

-- The subject a campaign's events count under: its own, or its message's template's; NULL for a message no longer
-- kept (pruned).
CREATE FUNCTION einmal.engagement_subject(c bigint) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN c < 4503599627370496 THEN 'campaign:' || c
                ELSE (SELECT 'template:' || coalesce(m.template, '') FROM einmal.messages AS m WHERE m.campaign_id = c)
           END
$$;

-- Each subscriber's last delivery, written by the writer's group statement alone (send_advance.sql): one narrow row
-- per subscriber, updated in place (HOT: no index changes). No foreign key: its check would lock the subscriber's
-- row for every delivery. Erasure deletes the row.
CREATE TABLE einmal.subscriber_deliveries (
    subscriber_id bigint PRIMARY KEY,
    at            timestamptz NOT NULL
) WITH (fillfactor = 80);

-- The rest of a subscriber's last activity, written off the send path (bounces, complaints, unsubscribes). Kept
-- apart from the deliveries so that the writer and an inbound event never wait for the same row. The last click is
-- read from einmal.clicks (its index by subscriber); an open's time would join here.
CREATE TABLE einmal.subscriber_activity (
    subscriber_id   bigint PRIMARY KEY REFERENCES einmal.subscribers (id),
    bounced_at      timestamptz,
    complained_at   timestamptz,
    unsubscribed_at timestamptz
);

CREATE FUNCTION einmal.engagement_bounces() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO einmal.engagement AS e (account_id, subject, source, bounced, complained)
    SELECT b.account_id, b.subject, 'inbound', count(*) FILTER (WHERE b.kind = 'hard'),
           count(*) FILTER (WHERE b.kind = 'complaint')
    FROM (SELECT n.account_id, n.kind, einmal.engagement_subject(n.campaign_id) AS subject
          FROM new_rows AS n WHERE n.kind IN ('hard', 'complaint')) AS b
    WHERE b.subject IS NOT NULL
    GROUP BY b.account_id, b.subject
    ON CONFLICT (account_id, subject, source) DO UPDATE
        SET bounced = e.bounced + EXCLUDED.bounced, complained = e.complained + EXCLUDED.complained;
    INSERT INTO einmal.subscriber_activity AS a (subscriber_id, bounced_at, complained_at)
    SELECT s.subscriber_id, max(n.created_at) FILTER (WHERE n.kind = 'hard'),
           max(n.created_at) FILTER (WHERE n.kind = 'complaint')
    FROM new_rows AS n JOIN einmal.sends AS s ON s.id = n.send_id AND s.campaign_id = n.campaign_id
    WHERE n.kind IN ('hard', 'complaint')
    GROUP BY s.subscriber_id ORDER BY s.subscriber_id
    ON CONFLICT (subscriber_id) DO UPDATE SET bounced_at = greatest(a.bounced_at, EXCLUDED.bounced_at),
        complained_at = greatest(a.complained_at, EXCLUDED.complained_at);
    RETURN NULL;
END $$;
CREATE TRIGGER bounces_engagement AFTER INSERT ON einmal.bounces
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION einmal.engagement_bounces();

-- A one-click unsubscribe is the inbound event 'unsubscribe:<account>.<campaign>.<subscriber>' (service/web/app.py),
-- claimed once: counted once, for the message's subject and its subscriber.
CREATE FUNCTION einmal.engagement_unsubscribes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows AS n WHERE n.event_id LIKE 'unsubscribe:%') THEN
        RETURN NULL;
    END IF;
    WITH u AS (
        SELECT c.account_id, einmal.engagement_subject(c.id) AS subject, sub.id AS subscriber_id, u.received_at
        FROM (SELECT regexp_match(n.event_id, '^unsubscribe:([0-9]{1,18})\.([0-9]{1,18})\.([0-9]{1,18})$') AS ids,
                     n.received_at
              FROM new_rows AS n WHERE n.event_id LIKE 'unsubscribe:%') AS u
        JOIN einmal.campaigns AS c ON c.id = u.ids[2]::bigint AND c.account_id = u.ids[1]::bigint
        JOIN einmal.subscribers AS sub ON sub.id = u.ids[3]::bigint AND sub.account_id = c.account_id
        WHERE u.ids IS NOT NULL
    ), counted AS (
        INSERT INTO einmal.engagement AS e (account_id, subject, source, unsubscribed)
        SELECT u.account_id, u.subject, 'unsubscribe', count(*) FROM u WHERE u.subject IS NOT NULL
        GROUP BY u.account_id, u.subject
        ON CONFLICT (account_id, subject, source) DO UPDATE SET unsubscribed = e.unsubscribed + EXCLUDED.unsubscribed
    )
    INSERT INTO einmal.subscriber_activity AS a (subscriber_id, unsubscribed_at)
    SELECT u.subscriber_id, max(u.received_at) FROM u GROUP BY u.subscriber_id ORDER BY u.subscriber_id
    ON CONFLICT (subscriber_id) DO UPDATE SET unsubscribed_at = greatest(a.unsubscribed_at, EXCLUDED.unsubscribed_at);
    RETURN NULL;
END $$;
CREATE TRIGGER inbound_events_engagement AFTER INSERT ON einmal.inbound_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION einmal.engagement_unsubscribes();

