-- What bounces and complaints came back, for operators' SQL and for counting soft bounces: one row
-- per inbound event that named a send row (hard and soft bounces, complaints), written in the
-- transaction that claims the event id. The address is the send row's (erased with it), never a copy.
CREATE TABLE einmal.bounces (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    text NOT NULL UNIQUE REFERENCES einmal.inbound_events (event_id),
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    send_id     bigint NOT NULL REFERENCES einmal.sends (id),
    kind        text NOT NULL CHECK (kind IN ('hard', 'soft', 'complaint')),
    status      text NOT NULL,  -- the DSN's Status (5.1.1, 4.2.2) or the ARF Feedback-Type
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bounces_send ON einmal.bounces (send_id);
CREATE INDEX bounces_soft ON einmal.bounces (account_id, created_at) WHERE kind = 'soft';
