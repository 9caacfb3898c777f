-- The outbound webhook events of a sending (migration 0112): what each row cost came mostly from four foreign-key
-- checks per event (a query and a row lock each: the event's account, its counter's account, the delivery's event
-- and endpoint) and from the event statement joining its own CTEs by nested loops (rows × rows). Their references
-- hold by construction instead, checked once per statement (bench/webhook_trigger.py: ~62 -> ~10 µs of server CPU
-- per row of an account with an endpoint):
-- - an event's account is that of the send, bounce, suppression or member row it is written for (each of which
--   references einmal.accounts), and no account is ever deleted;
-- - a delivery is written only by webhook_emit, in the statement that writes its event, to an endpoint that
--   statement locks FOR KEY SHARE (as the foreign key did, once per endpoint and not per row): an endpoint removed
--   meanwhile waits for the commit, and then takes its deliveries with it;
-- - a removed event or endpoint takes its deliveries with it (ON DELETE CASCADE before; now a statement trigger).
ALTER TABLE einmal.webhook_events DROP CONSTRAINT webhook_events_account_id_fkey;
ALTER TABLE einmal.webhook_sequences DROP CONSTRAINT webhook_sequences_account_id_fkey;
ALTER TABLE einmal.webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
ALTER TABLE einmal.webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey;

CREATE FUNCTION einmal.webhook_deliveries_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'webhook_events' THEN
        DELETE FROM einmal.webhook_deliveries d USING gone g WHERE d.event_id = g.id;
    ELSE
        DELETE FROM einmal.webhook_deliveries d USING gone g WHERE d.endpoint_id = g.id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER webhook_events_cascade AFTER DELETE ON einmal.webhook_events
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_deliveries_cascade();
CREATE TRIGGER webhook_endpoints_cascade AFTER DELETE ON einmal.webhook_endpoints
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION einmal.webhook_deliveries_cascade();

-- As 0112's, with the accounts' active endpoints read and locked once, and hash joins between the statement's
-- own rows (their counts are unknown to the planner, which took one row each and joined them in nested loops).
CREATE OR REPLACE FUNCTION einmal.webhook_emit(evs einmal.webhook_new_event[]) RETURNS void
LANGUAGE plpgsql SET enable_nestloop = off AS $$
DECLARE
    made bigint;
BEGIN
    WITH w AS (
        SELECT w.id, w.account_id, w.events FROM einmal.webhook_endpoints w
        WHERE w.disabled_at IS NULL AND w.account_id IN (SELECT u.account_id FROM unnest(evs) u)
        ORDER BY w.id
        FOR KEY SHARE
    ), e AS (
        SELECT u.account_id, u.type, md5(u.address) AS address, u.payload, u.i,
               row_number() OVER (PARTITION BY u.account_id, md5(u.address) ORDER BY u.i) AS r,
               count(*) OVER (PARTITION BY u.account_id, md5(u.address)) AS k
        FROM unnest(evs) WITH ORDINALITY AS u (account_id, type, address, payload, i)
        WHERE EXISTS (SELECT 1 FROM w WHERE w.account_id = u.account_id AND u.type = ANY (w.events))
    ), counted AS (
        INSERT INTO einmal.webhook_sequences AS s (account_id, address, n)
        SELECT account_id, address, k FROM e WHERE r = 1 ORDER BY account_id, address
        ON CONFLICT (account_id, address) DO UPDATE SET n = s.n + EXCLUDED.n
        RETURNING s.account_id, s.address, s.n
    ), ev AS (
        INSERT INTO einmal.webhook_events (account_id, type, sequence, payload)
        SELECT e.account_id, e.type, c.n - e.k + e.r, e.payload
        FROM e JOIN counted c ON c.account_id = e.account_id AND c.address = e.address
        RETURNING id, account_id, type
    ), fanned AS (
        INSERT INTO einmal.webhook_deliveries (event_id, endpoint_id)
        SELECT ev.id, w.id FROM ev JOIN w ON w.account_id = ev.account_id AND ev.type = ANY (w.events)
        RETURNING 1
    )
    SELECT count(*) INTO made FROM fanned;
    IF made > 0 THEN
        PERFORM pg_notify('einmal_webhook', '');
    END IF;
END
$$;
