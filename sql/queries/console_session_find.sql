-- The session of token hash :token_hash and its user, unless unused for :idle seconds or older than
-- :lifetime; marked used now, when it was last marked over a minute ago (a page that asks again every few
-- seconds writes once a minute). No row: signed out.
WITH found AS (
    SELECT s.id AS session_id, u.id AS user_id, u.name, u.role, u.account_id, s.seen_at
    FROM einmal.console_sessions AS s JOIN einmal.console_users AS u ON u.id = s.user_id
    WHERE s.token_hash = :token_hash
      AND s.seen_at > now() - make_interval(secs => :idle)
      AND s.created_at > now() - make_interval(secs => :lifetime)
), touched AS (
    UPDATE einmal.console_sessions SET seen_at = now()
    WHERE id IN (SELECT session_id FROM found WHERE seen_at < now() - interval '1 minute')
)
SELECT session_id, user_id, name, role, account_id FROM found
