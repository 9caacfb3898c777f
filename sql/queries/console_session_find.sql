-- The session of token hash :token_hash and its user, unless unused for :idle seconds or older than
-- :lifetime; marked used now. No row: signed out.
UPDATE einmal.console_sessions AS s SET seen_at = now()
FROM einmal.console_users AS u
WHERE s.token_hash = :token_hash AND u.id = s.user_id
  AND s.seen_at > now() - make_interval(secs => :idle)
  AND s.created_at > now() - make_interval(secs => :lifetime)
RETURNING s.id AS session_id, u.id AS user_id, u.name, u.role, u.account_id
