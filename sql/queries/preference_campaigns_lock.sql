-- Before a mailbox leaves list :list_id of account :account_id: lock the account's campaigns that target the list
-- and may still queue or send a message. A recipient build's chunk holds its campaign FOR SHARE until it commits
-- (recipients_build_chunk.sql), so this waits for a chunk in flight, and preference_sends_stop.sql then sees the
-- rows it queued; a start (approved -> sending) waits for the leave. In id order, so two leaves do not deadlock.
SELECT id FROM einmal.campaigns
WHERE account_id = :account_id AND :list_id = ANY (list_ids) AND status IN ('approved', 'sending', 'paused')
ORDER BY id
FOR NO KEY UPDATE
