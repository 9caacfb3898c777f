-- Click tracking (docs/design.md#click-tracking): off unless a campaign turns it on. A tracked campaign's links go
-- through the node's GET /c/{token}, which answers at once and records the click afterwards: one row per
-- (recipient, link, click), its id derived from the request (service/web/clicks.py), tagged 'human' or
-- 'machine' with the reasons. No address of the client and no user agent is kept: the reasons are.
ALTER TABLE einmal.campaigns ADD COLUMN track_clicks boolean NOT NULL DEFAULT false;

CREATE TABLE einmal.clicks (
    id            text PRIMARY KEY,  -- the click's event id: the same request (a retry, a repeat) gets the same one
    account_id    bigint NOT NULL REFERENCES einmal.accounts (id),
    campaign_id   bigint NOT NULL REFERENCES einmal.campaigns (id) ON DELETE CASCADE,
    subscriber_id bigint NOT NULL REFERENCES einmal.subscribers (id),
    link          integer NOT NULL CHECK (link >= 0),  -- its place among the template's links; 0: the hidden link
    url           text NOT NULL,  -- the template's link (the operator's, not the reader's)
    at            timestamptz NOT NULL,
    tag           text NOT NULL CHECK (tag IN ('human', 'machine')),
    reasons       text[] NOT NULL DEFAULT '{}',
    CONSTRAINT clicks_machine_reasons CHECK ((tag = 'machine') = (cardinality(reasons) > 0))
);
CREATE INDEX clicks_recipient ON einmal.clicks (campaign_id, subscriber_id, at);
CREATE INDEX clicks_subscriber ON einmal.clicks (subscriber_id);

ALTER TABLE einmal.webhook_endpoints DROP CONSTRAINT webhook_endpoints_events_check;
ALTER TABLE einmal.webhook_endpoints ADD CONSTRAINT webhook_endpoints_events_check
    CHECK (cardinality(events) > 0 AND events <@ ARRAY[
        'message.sent', 'message.failed', 'message.bounced', 'message.complained',
        'subscriber.unsubscribed', 'subscriber.confirmed', 'sequence.step_sent', 'message.clicked']);

-- Record a batch of clicks (parallel arrays, one element per click; `said`: the reasons the request itself gave,
-- comma-separated, '' for none; `counts`: how many links the click's message has) and return how many were new.
--  1. Each click is written once: a click whose id is known, or that repeats the same recipient's same link
--     within `repeat`, is not. A click of an erased subscriber or a pruned campaign is not written.
--     It is 'early' when it came within `early` of the send row's sent_at.
--  2. Evidence about a recipient's burst revises the tag of every click of it, written before or now: a click
--     on the hidden link makes 'machine' (reason 'hidden') every click of that recipient within `burst` of it;
--     every link of the message clicked within `burst` makes those clicks 'machine' (reason 'burst').
--  3. message.clicked for each click written, with its tag after 2; again, with "revised": true, for a click
--     written before whose tag 2 changed.
CREATE FUNCTION einmal.clicks_record(
    ids text[], accounts bigint[], campaigns bigint[], subscribers bigint[], links integer[], urls text[],
    ats timestamptz[], said text[], counts integer[], early interval, burst interval, repeat interval
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    made text[];
    revised text[];
BEGIN
    WITH given AS (
        SELECT g.*, lag(g.at) OVER (PARTITION BY g.campaign_id, g.subscriber_id, g.link ORDER BY g.at) AS before
        FROM unnest(ids, accounts, campaigns, subscribers, links, urls, ats, said)
             AS g (id, account_id, campaign_id, subscriber_id, link, url, at, said)
    ), written AS (
        INSERT INTO einmal.clicks AS k (id, account_id, campaign_id, subscriber_id, link, url, at, tag, reasons)
        SELECT g.id, g.account_id, g.campaign_id, g.subscriber_id, g.link, g.url, g.at,
               CASE WHEN r.reasons = '{}' THEN 'human' ELSE 'machine' END, r.reasons
        FROM given g
        JOIN einmal.campaigns c ON c.id = g.campaign_id AND c.account_id = g.account_id AND c.pruned_at IS NULL
        JOIN einmal.subscribers s ON s.id = g.subscriber_id AND s.account_id = g.account_id AND s.status <> 'erased'
        LEFT JOIN einmal.sends d ON d.campaign_id = g.campaign_id AND d.subscriber_id = g.subscriber_id
        CROSS JOIN LATERAL (
            SELECT array_remove(string_to_array(g.said, ',')
                                || CASE WHEN g.at < d.sent_at + early THEN 'early' END, NULL) AS reasons
        ) r
        WHERE (g.before IS NULL OR g.at - g.before >= repeat)
          AND NOT EXISTS (SELECT 1 FROM einmal.clicks o
                          WHERE o.campaign_id = g.campaign_id AND o.subscriber_id = g.subscriber_id
                            AND o.link = g.link AND o.at > g.at - repeat AND o.at < g.at + repeat)
        ON CONFLICT (id) DO NOTHING
        RETURNING k.id
    )
    SELECT coalesce(array_agg(id), '{}') INTO made FROM written;

    WITH touched AS (
        SELECT DISTINCT t.campaign_id, t.subscriber_id, t.n
        FROM unnest(campaigns, subscribers, counts) AS t (campaign_id, subscriber_id, n)
    ), evidence AS (
        SELECT k.campaign_id, k.subscriber_id, k.at - burst AS lo, k.at + burst AS hi, 'hidden' AS reason
        FROM einmal.clicks k JOIN touched t USING (campaign_id, subscriber_id)
        WHERE k.link = 0
        UNION ALL
        SELECT k.campaign_id, k.subscriber_id, k.at, k.at + burst, 'burst'
        FROM einmal.clicks k JOIN touched t USING (campaign_id, subscriber_id)
        WHERE k.link > 0 AND t.n >= 2
          AND (SELECT count(DISTINCT o.link) FROM einmal.clicks o
               WHERE o.campaign_id = k.campaign_id AND o.subscriber_id = k.subscriber_id AND o.link > 0
                 AND o.at >= k.at AND o.at <= k.at + burst) >= t.n
    ), hit AS (
        SELECT k.id, array_agg(DISTINCT e.reason) AS reasons
        FROM einmal.clicks k
        JOIN evidence e ON e.campaign_id = k.campaign_id AND e.subscriber_id = k.subscriber_id
                       AND k.at BETWEEN e.lo AND e.hi
        GROUP BY k.id
    ), changed AS (
        UPDATE einmal.clicks k
        SET tag = 'machine', reasons = ARRAY(SELECT DISTINCT x FROM unnest(k.reasons || h.reasons) AS x ORDER BY x)
        FROM hit h
        WHERE k.id = h.id AND NOT (h.reasons <@ k.reasons)
        RETURNING k.id
    )
    SELECT coalesce(array_agg(id), '{}') INTO revised FROM changed;

    IF EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        PERFORM einmal.webhook_emit(ARRAY(
            SELECT ROW(k.account_id, 'message.clicked', s.email_lower,
                       jsonb_build_object('campaign_id', k.campaign_id, 'subscriber_id', k.subscriber_id,
                                          'email', s.email, 'link', k.link, 'url', k.url, 'at', k.at,
                                          'tag', k.tag, 'reasons', to_jsonb(k.reasons),
                                          'revised', NOT (k.id = ANY (made))))::einmal.webhook_new_event
            FROM einmal.clicks k JOIN einmal.subscribers s ON s.id = k.subscriber_id
            WHERE k.id = ANY (made) OR k.id = ANY (revised)
            ORDER BY k.at, k.id));
    END IF;
    RETURN cardinality(made);
END $$;
