-- Campaign $1's in-doubt rows: each one's id, address, the node whose SMTP transaction it was in (claimed_by,
-- kept while in doubt), when it became in doubt (updated_at: when its node reported the connection lost after
-- the final dot, or when the scheduler found that node dead), its attempts and last reply. Only the ids in $2
-- and the mailbox keys in $3 when either is not NULL.
SELECT id, email, email_lower, claimed_by, attempts, last_reply, updated_at
FROM einmal.sends
WHERE campaign_id = $1 AND status = 'in_doubt'
  AND (($2::bigint[] IS NULL AND $3::text[] IS NULL) OR id = ANY ($2::bigint[]) OR email_lower = ANY ($3::text[]))
ORDER BY id
