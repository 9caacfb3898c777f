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
