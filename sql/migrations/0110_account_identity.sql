-- An account's own sender identity (service/accounts/identity.py, docs/design.md#accounts). Every part is
-- optional: an account that sets none sends as the installation's environment settings describe.
--
-- The From domains an account may use, each with its DKIM selectors and PEM private keys (selector i with
-- key i, at most two). Keys are secrets: no query but identity_of_account reads them.
CREATE TABLE einmal.account_domains (
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id) ON DELETE CASCADE,
    domain      text NOT NULL CHECK (domain = lower(domain) AND domain <> ''),
    selectors   text[] NOT NULL DEFAULT '{}',
    keys        text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, domain),
    CHECK (cardinality(selectors) = cardinality(keys) AND cardinality(keys) <= 2)
);

-- The relays of the installation, by the operator's name. A relay's rate and quotas are its own, for all
-- nodes and every account that sends through it (NULL: no limit). `url` is an EINMAL_SMTP_URLS entry and
-- may hold a password.
CREATE TABLE einmal.relays (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    url         text NOT NULL,
    rate        double precision CHECK (rate > 0),
    quota_hour  integer CHECK (quota_hour > 0),
    quota_day   integer CHECK (quota_day > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Which relays an account sends through, and its share of each by weight. No row: the environment's relays.
CREATE TABLE einmal.account_relays (
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id) ON DELETE CASCADE,
    relay_id    bigint NOT NULL REFERENCES einmal.relays (id),
    weight      integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    PRIMARY KEY (account_id, relay_id)
);
CREATE INDEX account_relays_relay ON einmal.account_relays (relay_id);

-- The account's return path (VERP, service/mail/verp.py) and its secret, and its unsubscribe mailto.
ALTER TABLE einmal.accounts
    ADD COLUMN return_path        text,
    ADD COLUMN return_path_secret text,
    ADD COLUMN unsubscribe_mailto text;
