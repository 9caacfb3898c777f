-- The audit log, newest first, below id :before, of account :account_id only unless NULL, at most :limit
-- lines, with each account's name (NULL: the installation's, or an account gone).
SELECT l.id, l.at, l.actor, l.account_id, a.name AS account, l.action, l.subject
FROM einmal.audit_log AS l LEFT JOIN einmal.accounts AS a ON a.id = l.account_id
WHERE l.id < :before AND (:account_id::bigint IS NULL OR l.account_id = :account_id::bigint)
ORDER BY l.id DESC
LIMIT :limit
