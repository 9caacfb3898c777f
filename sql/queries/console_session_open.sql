-- A session of user :user_id, known by the SHA-256 :token_hash of its token. Every session past the limits
-- (:idle seconds unused, :lifetime old) is removed on the way: the table holds the sessions open since the
-- last sign-in, a few rows a user.
WITH expired AS (
    DELETE FROM einmal.console_sessions
    WHERE seen_at <= now() - make_interval(secs => :idle) OR created_at <= now() - make_interval(secs => :lifetime)
)
INSERT INTO einmal.console_sessions (token_hash, user_id) VALUES (:token_hash, :user_id)
