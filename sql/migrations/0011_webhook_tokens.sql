-- Mailgun's signature covers only a timestamp and a random token, not the event it comes with: each
-- token is accepted for one event (the hash of its content), and kept while its timestamp may still be
-- accepted (docs/design.md#inbound-events). Tokens are random: nothing here names a person.
CREATE TABLE einmal.webhook_tokens (
    token      text PRIMARY KEY,
    digest     text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX webhook_tokens_expiry ON einmal.webhook_tokens (expires_at);
