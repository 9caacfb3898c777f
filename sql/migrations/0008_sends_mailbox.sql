-- A provider's bounce or complaint that does not name its message is tied to the newest send row to
-- its address (service/webhooks.py): found by mailbox key, in any account or in one.
CREATE INDEX sends_mailbox ON einmal.sends (email_lower, account_id, id);
