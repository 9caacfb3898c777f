-- The console's search of an account's subscribers by an attribute (sql/queries/subscribers_with_attribute.sql)
-- reads indexes, never every subscriber:
--  * subscribers_account_id walks the account's own subscribers by id: where the value is common, the first page
--    is among the first few thousand (and the API's list of an account's subscribers, by id, walks it too);
--  * subscribers_account_attributes finds a rarer value's subscribers directly. Its keys are the account's id
--    and the attribute together ({"<account_id>": {"plan": "pro"}}, jsonb_path_ops hashing each whole path), so
--    a search finds its own account's matches alone.
CREATE INDEX subscribers_account_id ON einmal.subscribers (account_id, id);

CREATE FUNCTION einmal.account_attributes(account bigint, attributes jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN jsonb_set('{}', ARRAY[account::text], attributes);

CREATE INDEX subscribers_account_attributes ON einmal.subscribers
    USING gin (einmal.account_attributes(account_id, attributes) jsonb_path_ops);

-- A subscriber as the API shows it: what is true of it now (einmal.subscriber_state), its lists (confirmed
-- memberships: the ones campaigns reach), its sign-ups awaiting confirmation (double opt-in) and its mailbox's
-- suppression. subscribers_of_account.sql and subscribers_with_attribute.sql choose the rows.
CREATE VIEW einmal.subscribers_shown AS
SELECT s.id, s.account_id, s.email_lower, s.status AS stored_status,
       s.email, s.name, einmal.subscriber_state(s.id, x.reason) AS status, s.attributes, s.created_at,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'confirmed'), '{}') AS lists,
       coalesce((SELECT array_agg(l.name ORDER BY l.name)
                 FROM einmal.list_members m JOIN einmal.lists l ON l.id = m.list_id
                 WHERE m.subscriber_id = s.id AND m.state = 'unconfirmed'), '{}') AS unconfirmed_lists,
       x.reason AS suppressed
FROM einmal.subscribers AS s
LEFT JOIN einmal.suppressions AS x ON x.account_id = s.account_id AND x.email_lower = s.email_lower;
