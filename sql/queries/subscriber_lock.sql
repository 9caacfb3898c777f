-- Before account $1's subscriber of mailbox key $2 is added, until the transaction ends, waiting at most
-- $3: the account's import lock shared and the key's own alone (einmal.subscriber_lock, migration 0102).
SELECT einmal.subscriber_lock($1, $2::text, $3::text)
