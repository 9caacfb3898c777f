-- After the mailbox of account :account_id's subscriber :subscriber_id left a list: its rows not yet on the wire
-- (queued, or claimed and not started) in campaigns :campaign_ids (locked by preference_campaigns_lock.sql) that
-- none of the campaign's lists reaches any more (no confirmed subscriber of the mailbox key is a confirmed member of
-- one of them: the recipient build takes no other, docs/design.md#recipient-build) settle as 'suppressed', with the reply 'left
-- the list'. A claimed row's start (send_advance.sql, step `started`) then finds it no longer claimed by its token
-- and sends nothing. A row already `sending` is on the wire.
UPDATE einmal.sends AS d
SET status = 'suppressed', claimed_by = NULL, last_reply = 'left the list', updated_at = now()
FROM einmal.campaigns AS c, einmal.subscribers AS me
WHERE me.id = :subscriber_id AND me.account_id = :account_id
  AND c.id = ANY (:campaign_ids::bigint[]) AND c.account_id = :account_id
  AND d.campaign_id = c.id AND d.email_lower = me.email_lower AND d.status IN ('queued', 'claimed')
  AND NOT EXISTS (SELECT 1 FROM einmal.subscribers AS s JOIN einmal.list_members AS m ON m.subscriber_id = s.id
                  WHERE s.account_id = :account_id AND s.email_lower = me.email_lower AND s.status = 'confirmed'
                    AND m.state = 'confirmed' AND m.list_id = ANY (c.list_ids))
RETURNING d.id
