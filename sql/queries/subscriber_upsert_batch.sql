-- A batch of account :account_id's subscribers upserted in one statement (einmal.subscribers_upsert_rows,
-- migration 0128): row i is the mailbox key :email_keys[i], spelt :emails[i] when it is new, its name set to
-- :names[i] unless NULL and the attributes :attributes[i] (a JSON array's element: an object, or null) merged into
-- its own; row :member_rows[j] put on the account's list :member_lists[j] (confirmed when new; an unconfirmed
-- sign-up stays one). Under the import lock shared and the keys' locks in the order of their ids, waiting at most
-- :lock_wait for each. Per row: its number (1-based), its subscriber, whether it is new, its state and the named
-- lists still awaiting its confirmation.
SELECT row_number, subscriber_id AS id, created, status, unconfirmed_lists
FROM einmal.subscribers_upsert_rows(:account_id, :emails::text[], :email_keys::text[], :names::text[],
    :attributes::jsonb, :member_rows::integer[], :member_lists::bigint[], :lock_wait::text)
