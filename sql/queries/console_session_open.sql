-- A session of user :user_id, known by the SHA-256 :token_hash of its token; the user's sessions past the
-- limits (:idle seconds unused, :lifetime old) are removed on the way.
WITH expired AS (
    DELETE FROM einmal.console_sessions
    WHERE user_id = :user_id
      AND (seen_at <= now() - make_interval(secs => :idle) OR created_at <= now() - make_interval(secs => :lifetime))
)
INSERT INTO einmal.console_sessions (token_hash, user_id) VALUES (:token_hash, :user_id)
