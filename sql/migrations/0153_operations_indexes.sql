-- What the console's operations pages read (docs/guide/console.md): an account's bounces and complaints of the
-- last 30 days by when they came back (its deliverability), its transactional messages newest first, and an
-- endpoint's newest webhook deliveries (a backlog of 50,000 was sorted whole for each page of 100: 300 ms and
-- more). Each costs an insert a row; a delivery's state changes touch none of their columns.
CREATE INDEX bounces_account_created ON einmal.bounces (account_id, created_at);
CREATE INDEX messages_account ON einmal.messages (account_id, campaign_id);
CREATE INDEX webhook_deliveries_newest ON einmal.webhook_deliveries (endpoint_id, created_at, event_id);
