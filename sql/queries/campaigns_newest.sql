-- The newest campaigns of account :account_id (NULL: of every account), at most :limit, with their account's
-- name: those sending or paused first, then the others (the console's dashboard).
SELECT c.id, a.name AS account, c.account_id, c.name, c.subject, c.status, c.pause_reason, c.created_at
FROM einmal.campaigns AS c JOIN einmal.accounts AS a ON a.id = c.account_id
WHERE (:account_id::bigint IS NULL OR c.account_id = :account_id::bigint) AND c.kind = 'campaign'
ORDER BY c.status IN ('sending', 'paused') DESC, c.id DESC
LIMIT :limit
