-- Campaign :campaign_id's in-doubt rows: each one's id, address, the node whose SMTP transaction it was in (claimed_by,
-- kept while in doubt), when it became in doubt (updated_at: when its node reported the connection lost after
-- the final dot, or when the scheduler found that node dead), its attempts and last reply. Only the ids in :ids
-- and the mailbox keys in :keys when either is not NULL.
SELECT id, email, email_lower, claimed_by, attempts, last_reply, updated_at
FROM einmal.sends
WHERE campaign_id = :campaign_id AND status = 'in_doubt'
  AND ((:ids::bigint[] IS NULL AND :keys::text[] IS NULL) OR id = ANY (:ids::bigint[]) OR email_lower = ANY (:keys::text[]))
ORDER BY id
