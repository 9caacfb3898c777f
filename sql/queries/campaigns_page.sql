-- The campaigns of account :account_id (NULL: of every account) with an id below :before (cursor), newest first,
-- at most :limit, with their account's name (the console's campaigns page, and one campaign's heading).
SELECT c.id, a.name AS account, c.account_id, c.name, c.subject, c.status, c.pause_reason, c.created_at
FROM einmal.campaigns AS c JOIN einmal.accounts AS a ON a.id = c.account_id
WHERE (:account_id::bigint IS NULL OR c.account_id = :account_id::bigint) AND c.id < :before
  AND c.kind = 'campaign'  -- not a list's confirmations
ORDER BY c.id DESC
LIMIT :limit
