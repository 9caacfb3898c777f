-- What the console's operations pages read (docs/guide/console.md): an account's bounces and complaints of the
-- last 30 days by when they came back (its deliverability), and its transactional messages newest first. Both
-- tables are written once a row and never updated, so the indexes cost an insert each.
CREATE INDEX bounces_account_created ON einmal.bounces (account_id, created_at);
CREATE INDEX messages_account ON einmal.messages (account_id, campaign_id);
