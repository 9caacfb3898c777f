-- What a campaign's messages met, counted as it happens, so that the campaign can pause itself when
-- its complaint, hard-bounce or policy-rejection rate crosses its threshold (service/health.py,
-- docs/design.md#sending-budget) without counting its rows or its bounces each time. A campaign's figures are the
-- sums over its rows here, one row per source, so that no two writers share a row:
--   a send pipeline's token: delivered (answered 250), refused (a 5.7.x refusal at send time, per
--     attempt) and rejected (failed at send time for an address reason, 550 5.1.1), added by its
--     writer's group commit (send_advance.sql), one row per campaign per statement;
--   'inbound': bounced (a hard bounce for an address reason, by mail or webhook) and complained, added in
--     the transaction that records the bounce (bounce_count.sql);
--   'resumed': the sums at the campaign's last resume, negated, and when (since): so the figures are
--     those since the last resume, and a bounce or complaint about a message that went out before it
--     is not counted.
CREATE TABLE einmal.campaign_tallies (
    campaign_id bigint NOT NULL REFERENCES einmal.campaigns (id),
    source      text NOT NULL,
    delivered   bigint NOT NULL DEFAULT 0,
    refused     bigint NOT NULL DEFAULT 0,
    rejected    bigint NOT NULL DEFAULT 0,
    bounced     bigint NOT NULL DEFAULT 0,
    complained  bigint NOT NULL DEFAULT 0,
    since       timestamptz,  -- 'resumed' only: when
    PRIMARY KEY (campaign_id, source)
);
