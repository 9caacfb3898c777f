-- An SMTP answer a node got but could not put on its row, because the row was no longer its token's:
-- another node returned and took it, or an asynchronous failover lost the claim (docs/design.md#liveness).
-- The answer may say a message went out that the row does not show, and may go out again: it is kept
-- here for the operator instead of being dropped. No reply text: a reply may quote the address, which
-- an erasure must be able to remove; its code is enough to tell delivered from refused.
CREATE TABLE einmal.lost_outcomes (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    send_id          bigint NOT NULL,  -- no foreign key: the row may be gone
    campaign_id      bigint,  -- NULL: no such row
    subscriber_id    bigint,
    token            text NOT NULL,  -- the claim token that got the answer
    outcome          text NOT NULL,  -- what the answer would have made of the row: sent, failed, queued, ...
    reply_code       text,  -- the SMTP reply's code, when it has one
    found_status     text,  -- the row as the answer found it
    found_claimed_by text,
    recorded_at      timestamptz NOT NULL DEFAULT now()
);
