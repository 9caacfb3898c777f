-- Every change made through the console, the API or the console's users' commands: who, what, when and
-- which account (service/audit/). Rows outlive what they name: no foreign key, an account's id is kept
-- after it goes.
CREATE TABLE einmal.audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor       text NOT NULL,             -- 'console:ann@example.org', 'api:key 7', 'cli'
    account_id  bigint,                    -- the account changed; NULL: the installation's own (an operator)
    action      text NOT NULL,             -- 'console.login', 'campaign.approve', 'user.add', …
    subject     text NOT NULL DEFAULT ''   -- what it was done to: 'campaign 12', 'user bob'
);
CREATE INDEX audit_log_account ON einmal.audit_log (account_id, id);
