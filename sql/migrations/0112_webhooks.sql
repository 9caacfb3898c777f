-- Outbound webhooks (docs/design.md#webhooks): an account's endpoints, an outbox of events about its mail, and
-- one delivery row per (event, endpoint). The events are written by the triggers below, in the transaction of
-- the change that causes them: no change commits without its event, no event exists for a change rolled back.
-- Not to be confused with einmal.webhook_tokens (0011), which guards INBOUND provider webhooks.

CREATE TABLE einmal.webhook_endpoints (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id       bigint NOT NULL REFERENCES einmal.accounts (id),
    url              text NOT NULL CHECK (url <> '' AND length(url) <= 2000),
    events           text[] NOT NULL CHECK (cardinality(events) > 0 AND events <@ ARRAY[
                         'message.sent', 'message.failed', 'message.bounced', 'message.complained',
                         'subscriber.unsubscribed', 'subscriber.confirmed']),
    -- whsec_<base64>: kept as is, since each delivery is signed with it (a hash would not sign)
    secret           text NOT NULL CHECK (secret LIKE 'whsec\_%'),
    -- the secret before the last rotation, still signed with until previous_until
    previous_secret  text CHECK (previous_secret LIKE 'whsec\_%'),
    previous_until   timestamptz,
    disabled_at      timestamptz,
    disabled_reason  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_endpoints_previous CHECK ((previous_secret IS NULL) = (previous_until IS NULL)),
    CONSTRAINT webhook_endpoints_disabled CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL))
);
CREATE INDEX webhook_endpoints_active ON einmal.webhook_endpoints (account_id) WHERE disabled_at IS NULL;

-- The order key: events about one address of one account are numbered 1, 2, 3… in the order their
-- transactions commit (the counter's row lock is held to the commit). The address is kept as its MD5 only.
CREATE TABLE einmal.webhook_sequences (
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    address     text NOT NULL,  -- md5(email_lower)
    n           bigint NOT NULL,
    PRIMARY KEY (account_id, address)
);

CREATE TABLE einmal.webhook_events (
    id          text PRIMARY KEY DEFAULT 'evt_' || replace(gen_random_uuid()::text, '-', ''),
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    type        text NOT NULL,
    sequence    bigint NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_created ON einmal.webhook_events (created_at);

CREATE TABLE einmal.webhook_deliveries (
    event_id        text NOT NULL REFERENCES einmal.webhook_events (id) ON DELETE CASCADE,
    endpoint_id     bigint NOT NULL REFERENCES einmal.webhook_endpoints (id) ON DELETE CASCADE,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'parked')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      text,
    lease_until     timestamptz,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, endpoint_id)
);
-- the claim: an endpoint's due deliveries, oldest first
CREATE INDEX webhook_deliveries_due ON einmal.webhook_deliveries (endpoint_id, next_attempt_at, event_id)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON einmal.webhook_deliveries (endpoint_id, state);
-- the claim's question "has this endpoint one in flight?": the few rows leased, not its whole backlog
CREATE INDEX webhook_deliveries_leased ON einmal.webhook_deliveries (endpoint_id) WHERE lease_until IS NOT NULL;

CREATE TYPE einmal.webhook_new_event AS (account_id bigint, type text, address text, payload jsonb);

-- Write the events `evs` that an active endpoint of their account subscribes to, each numbered in its
-- (account, address) order, with one delivery per such endpoint; wake the delivery actors. Counters are
-- taken in (account, address) order, so two statements never wait for each other in a cycle.
CREATE FUNCTION einmal.webhook_emit(evs einmal.webhook_new_event[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    made bigint;
BEGIN
    WITH e AS (
        SELECT u.account_id, u.type, md5(u.address) AS address, u.payload, u.i
        FROM unnest(evs) WITH ORDINALITY AS u (account_id, type, address, payload, i)
        WHERE EXISTS (SELECT 1 FROM einmal.webhook_endpoints w
                      WHERE w.account_id = u.account_id AND w.disabled_at IS NULL AND u.type = ANY (w.events))
    ), keyed AS (
        SELECT account_id, address, count(*) AS k FROM e GROUP BY account_id, address
    ), counted AS (
        INSERT INTO einmal.webhook_sequences AS s (account_id, address, n)
        SELECT account_id, address, k FROM keyed ORDER BY account_id, address
        ON CONFLICT (account_id, address) DO UPDATE SET n = s.n + EXCLUDED.n
        RETURNING s.account_id, s.address, s.n
    ), ev AS (
        INSERT INTO einmal.webhook_events (account_id, type, sequence, payload)
        SELECT e.account_id, e.type,
               c.n - kd.k + row_number() OVER (PARTITION BY e.account_id, e.address ORDER BY e.i), e.payload
        FROM e
        JOIN keyed kd ON kd.account_id = e.account_id AND kd.address = e.address
        JOIN counted c ON c.account_id = e.account_id AND c.address = e.address
        RETURNING id, account_id, type
    ), fanned AS (
        INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id)
        SELECT ev.id, w.id FROM ev
        JOIN einmal.webhook_endpoints w
          ON w.account_id = ev.account_id AND w.disabled_at IS NULL AND ev.type = ANY (w.events)
        RETURNING 1
    )
    SELECT count(*) INTO made FROM fanned;
    IF made > 0 THEN
        PERFORM pg_notify('einmal_webhook', '');
    END IF;
END
$$;

-- A campaign's send row moving to 'sent' or 'failed': message.sent, message.failed. A statement-level
-- trigger, so that the sending's one statement per group stays one statement; it returns at once while no
-- endpoint is active anywhere (one index probe).
CREATE FUNCTION einmal.webhook_sends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(n.account_id, 'message.' || n.status, n.email_lower,
                   jsonb_build_object('campaign_id', n.campaign_id, 'subscriber_id', n.subscriber_id,
                                      'email', n.email, 'status', n.status, 'at', n.updated_at)
                   || CASE WHEN n.status = 'failed' THEN jsonb_build_object('reply', n.last_reply)
                           ELSE '{}'::jsonb END
                   -- a transactional message (migration 0114) is a campaign of its own: its id is the message's
                   || CASE WHEN c.kind = 'message' THEN jsonb_build_object('message_id', n.campaign_id)
                           ELSE '{}'::jsonb END)::einmal.webhook_new_event
        FROM new_rows n
        JOIN old_rows o ON o.id = n.id AND o.campaign_id = n.campaign_id
        JOIN einmal.campaigns c ON c.id = n.campaign_id AND c.kind IN ('campaign', 'message')
        WHERE n.status IN ('sent', 'failed') AND o.status IS DISTINCT FROM n.status
          AND EXISTS (SELECT 1 FROM einmal.webhook_endpoints w WHERE w.account_id = n.account_id AND w.disabled_at IS NULL)
        ORDER BY n.id));
    RETURN NULL;
END $$;
CREATE TRIGGER sends_webhooks AFTER UPDATE ON einmal.sends
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_sends();

-- A bounce or complaint recorded (einmal.bounces): message.bounced, message.complained.
CREATE FUNCTION einmal.webhook_bounces() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(b.account_id, CASE WHEN b.kind = 'complaint' THEN 'message.complained' ELSE 'message.bounced' END,
                   s.email_lower,
                   jsonb_build_object('campaign_id', b.campaign_id, 'subscriber_id', s.subscriber_id,
                                      'email', s.email, 'kind', b.kind, 'reason', b.reason, 'status', b.status,
                                      'at', b.created_at))::einmal.webhook_new_event
        FROM new_rows b
        JOIN einmal.sends s ON s.id = b.send_id AND s.campaign_id = b.campaign_id
        ORDER BY b.id));
    RETURN NULL;
END $$;
CREATE TRIGGER bounces_webhooks AFTER INSERT ON einmal.bounces
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_bounces();

-- An address suppressed because its owner unsubscribed: subscriber.unsubscribed.
CREATE FUNCTION einmal.webhook_suppressions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(x.account_id, 'subscriber.unsubscribed', x.email_lower,
                   jsonb_build_object('email', x.email_lower, 'at', x.created_at))::einmal.webhook_new_event
        FROM new_rows x WHERE x.reason = 'unsubscribe'
        ORDER BY x.email_lower));
    RETURN NULL;
END $$;
CREATE TRIGGER suppressions_webhooks AFTER INSERT ON einmal.suppressions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_suppressions();

-- A double opt-in membership confirmed: subscriber.confirmed.
CREATE FUNCTION einmal.webhook_members() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM einmal.webhook_endpoints WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    PERFORM einmal.webhook_emit(ARRAY(
        SELECT ROW(l.account_id, 'subscriber.confirmed', s.email_lower,
                   jsonb_build_object('list', l.name, 'subscriber_id', s.id, 'email', s.email,
                                      'at', n.confirmed_at))::einmal.webhook_new_event
        FROM new_rows n
        JOIN old_rows o ON o.list_id = n.list_id AND o.subscriber_id = n.subscriber_id
        JOIN einmal.lists l ON l.id = n.list_id
        JOIN einmal.subscribers s ON s.id = n.subscriber_id
        WHERE o.state = 'unconfirmed' AND n.state = 'confirmed'
        ORDER BY n.list_id, n.subscriber_id));
    RETURN NULL;
END $$;
CREATE TRIGGER list_members_webhooks AFTER UPDATE ON einmal.list_members
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_members();

-- An erasure (service/subscribers/erasure.py) replaces a subscriber's address with a placeholder: the events
-- about the address, delivered or still to deliver, take the placeholder too, and its order counter goes (an
-- MD5 of an address can be guessed back). No event keeps an erased address.
CREATE FUNCTION einmal.webhook_erase() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE einmal.webhook_events
    SET payload = payload || jsonb_build_object('email', NEW.email)
    WHERE account_id = NEW.account_id AND payload->>'email' IN (OLD.email, OLD.email_lower);
    DELETE FROM einmal.webhook_sequences WHERE account_id = NEW.account_id AND address = md5(OLD.email_lower);
    RETURN NULL;
END $$;
CREATE TRIGGER subscribers_webhook_erase AFTER UPDATE OF email ON einmal.subscribers
    FOR EACH ROW WHEN (NEW.status = 'erased' AND OLD.email IS DISTINCT FROM NEW.email)
    EXECUTE FUNCTION einmal.webhook_erase();
