-- einmal's tables. Operators query einmal.sends, its columns campaign_id,
-- email_lower and status, and the status words: they are part of the contract.

CREATE TABLE einmal.accounts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE einmal.subscribers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    email       text NOT NULL,
    email_lower text GENERATED ALWAYS AS (lower(email)) STORED,
    name        text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'confirmed'
                CHECK (status IN ('confirmed', 'unconfirmed', 'unsubscribed', 'bounced')),
    attributes  jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- the same address may exist more than once, in another case
    UNIQUE (account_id, email)
);
CREATE INDEX subscribers_account_email_lower ON einmal.subscribers (account_id, email_lower, created_at, id);

CREATE TABLE einmal.lists (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);

CREATE TABLE einmal.list_members (
    list_id       bigint NOT NULL REFERENCES einmal.lists (id),
    subscriber_id bigint NOT NULL REFERENCES einmal.subscribers (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (list_id, subscriber_id)
);
CREATE INDEX list_members_subscriber ON einmal.list_members (subscriber_id);

CREATE TABLE einmal.campaigns (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id          bigint NOT NULL REFERENCES einmal.accounts (id),
    name                text NOT NULL,
    subject             text NOT NULL,
    from_address        text NOT NULL,
    body_text           text NOT NULL,
    body_html           text,
    list_ids            bigint[] NOT NULL,
    status              text NOT NULL DEFAULT 'draft'
                        CHECK (status IN ('draft', 'approved', 'sending', 'paused', 'sent', 'cancelled')),
    scheduled_for       timestamptz NOT NULL DEFAULT now(),
    recipients_built_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz
);
CREATE INDEX campaigns_due ON einmal.campaigns (scheduled_for) WHERE status = 'approved';

CREATE TABLE einmal.sends (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    campaign_id     bigint NOT NULL REFERENCES einmal.campaigns (id),
    account_id      bigint NOT NULL REFERENCES einmal.accounts (id),
    subscriber_id   bigint NOT NULL REFERENCES einmal.subscribers (id),
    email           text NOT NULL,
    email_lower     text NOT NULL,
    job_id          text NOT NULL,
    status          text NOT NULL DEFAULT 'queued'
                    CHECK (status IN ('queued', 'claimed', 'sending', 'sent', 'suppressed', 'failed', 'in_doubt')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    claimed_by      text,
    last_reply      text,
    sent_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sends_one_per_subscriber UNIQUE (campaign_id, subscriber_id),
    CONSTRAINT sends_one_per_address UNIQUE (campaign_id, email_lower),
    CONSTRAINT sends_job_id UNIQUE (job_id),
    CONSTRAINT sends_job_id_derived CHECK (job_id = 'campaign:' || campaign_id || ':' || subscriber_id),
    CONSTRAINT sends_claimed_has_owner CHECK (status NOT IN ('claimed', 'sending') OR claimed_by IS NOT NULL)
);
-- serves the claim: queued rows of one campaign, due first
CREATE INDEX sends_claimable ON einmal.sends (campaign_id, next_attempt_at, id) WHERE status = 'queued';
-- serves the rescue of a dead node's rows
CREATE INDEX sends_held ON einmal.sends (claimed_by) WHERE status IN ('claimed', 'sending');
CREATE INDEX sends_campaign_status ON einmal.sends (campaign_id, status);

CREATE TABLE einmal.suppressions (
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    email_lower text NOT NULL CHECK (email_lower = lower(email_lower)),
    reason      text NOT NULL DEFAULT 'manual'
                CHECK (reason <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, email_lower)
);
CREATE INDEX suppressions_created ON einmal.suppressions (created_at);

CREATE FUNCTION einmal.notify_suppression() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('einmal_suppression', NEW.account_id || ':' || NEW.email_lower);
    RETURN NULL;
END $$;
CREATE TRIGGER suppressions_notify AFTER INSERT ON einmal.suppressions
    FOR EACH ROW EXECUTE FUNCTION einmal.notify_suppression();

CREATE TABLE einmal.inbound_events (
    event_id     text PRIMARY KEY CHECK (event_id LIKE '%:%'),
    payload_hash text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE einmal.nodes (
    id           text PRIMARY KEY,
    hostname     text NOT NULL DEFAULT '',
    pid          integer,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
