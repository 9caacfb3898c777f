-- A new password hash for the console user of key :name_key, and the end of its sessions; its id and
-- account, or no row.
WITH changed AS (
    UPDATE einmal.console_users SET password_hash = :password_hash, password_changed_at = now()
    WHERE name_key = :name_key
    RETURNING id, account_id, name
), ended AS (
    DELETE FROM einmal.console_sessions WHERE user_id IN (SELECT id FROM changed)
)
SELECT id, account_id, name FROM changed
