-- Open tracking (docs/design.md#click-tracking): off unless a campaign turns it on (or its account by default).
-- A tracked campaign's HTML body carries a 1x1 pixel from the node's GET /c/o/{token}, which answers at once and
-- records the open afterwards: one row per (recipient, open), its id derived from the request
-- (service/web/opens.py), tagged 'human' or 'machine' with the reasons. No address of the client and no user
-- agent is kept: the reasons are.
ALTER TABLE einmal.campaigns ADD COLUMN track_opens boolean NOT NULL DEFAULT false;
ALTER TABLE einmal.accounts ADD COLUMN track_opens boolean NOT NULL DEFAULT false;  -- a new campaign's default

CREATE TABLE einmal.opens (
    id            text PRIMARY KEY,  -- the open's event id: the same request (a retry, a repeat) gets the same one
    account_id    bigint NOT NULL REFERENCES einmal.accounts (id),
    campaign_id   bigint NOT NULL REFERENCES einmal.campaigns (id) ON DELETE CASCADE,
    subscriber_id bigint NOT NULL REFERENCES einmal.subscribers (id),
    at            timestamptz NOT NULL,
    tag           text NOT NULL CHECK (tag IN ('human', 'machine')),
    reasons       text[] NOT NULL DEFAULT '{}',
    CONSTRAINT opens_machine_reasons CHECK ((tag = 'machine') = (cardinality(reasons) > 0))
);
CREATE INDEX opens_recipient ON einmal.opens (campaign_id, subscriber_id, at);
CREATE INDEX opens_subscriber ON einmal.opens (subscriber_id);

ALTER TABLE einmal.webhook_endpoints DROP CONSTRAINT webhook_endpoints_events_check;
ALTER TABLE einmal.webhook_endpoints ADD CONSTRAINT webhook_endpoints_events_check
    CHECK (cardinality(events) > 0 AND events <@ ARRAY[
        'message.sent', 'message.failed', 'message.bounced', 'message.complained',
        'subscriber.unsubscribed', 'subscriber.confirmed', 'sequence.step_sent', 'message.clicked',
        'message.opened']);

-- Record a batch of opens (parallel arrays, one element per open; `said`: the reasons the request itself gave,
-- comma-separated, '' for none) and return how many were new. Each open is written once: one whose id is known,
-- or that repeats the same recipient's open within `repeat`, is not; nor one of an erased subscriber or a pruned
-- campaign. It is 'early' when it came within `early` of the send row's sent_at. message.opened for each open
-- written, with its tag.
CREATE FUNCTION einmal.opens_record(
    ids text[], accounts bigint[], campaigns bigint[], subscribers bigint[], ats timestamptz[], said text[],
    early interval, repeat interval
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    made text[];
BEGIN
    WITH given AS (
        SELECT g.*, lag(g.at) OVER (PARTITION BY g.campaign_id, g.subscriber_id ORDER BY g.at) AS before
        FROM unnest(ids, accounts, campaigns, subscribers, ats, said)
             AS g (id, account_id, campaign_id, subscriber_id, at, said)
    ), written AS (
        INSERT INTO einmal.opens AS o (id, account_id, campaign_id, subscriber_id, at, tag, reasons)
        SELECT g.id, g.account_id, g.campaign_id, g.subscriber_id, g.at,
               CASE WHEN r.reasons = '{}' THEN 'human' ELSE 'machine' END, r.reasons
        FROM given g
        JOIN einmal.campaigns c ON c.id = g.campaign_id AND c.account_id = g.account_id AND c.pruned_at IS NULL
        JOIN einmal.subscribers s ON s.id = g.subscriber_id AND s.account_id = g.account_id AND s.status <> 'erased'
        LEFT JOIN einmal.sends d ON d.campaign_id = g.campaign_id AND d.subscriber_id = g.subscriber_id
        CROSS JOIN LATERAL (
            SELECT ARRAY(SELECT DISTINCT x FROM unnest(string_to_array(g.said, ',')
                                                       || CASE WHEN g.at < d.sent_at + early THEN 'early' END) AS x
                         WHERE x IS NOT NULL AND x <> '' ORDER BY x) AS reasons
        ) r
        WHERE (g.before IS NULL OR g.at - g.before >= repeat)
          AND NOT EXISTS (SELECT 1 FROM einmal.opens p
                          WHERE p.campaign_id = g.campaign_id AND p.subscriber_id = g.subscriber_id
                            AND p.at > g.at - repeat AND p.at < g.at + repeat)
        ON CONFLICT (id) DO NOTHING
        RETURNING o.id
    )
    SELECT coalesce(array_agg(id), '{}') INTO made FROM written;

    IF EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        PERFORM einmal.webhook_emit(ARRAY(
            SELECT ROW(o.account_id, 'message.opened', s.email_lower,
                       jsonb_build_object('campaign_id', o.campaign_id, 'subscriber_id', o.subscriber_id,
                                          'email', s.email, 'at', o.at, 'tag', o.tag,
                                          'reasons', to_jsonb(o.reasons)))::einmal.webhook_new_event
            FROM einmal.opens o JOIN einmal.subscribers s ON s.id = o.subscriber_id
            WHERE o.id = ANY (made)
            ORDER BY o.at, o.id));
    END IF;
    RETURN cardinality(made);
END $$;
