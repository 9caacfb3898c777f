-- Before account :account_id's subscriber of mailbox key :email_key is added, until the transaction ends, waiting at
-- most :lock_wait: the account's import lock shared and the key's own alone (einmal.subscriber_lock, migration
-- 0102).
SELECT einmal.subscriber_lock(:account_id, :email_key::text, :lock_wait::text)
