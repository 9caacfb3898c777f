-- A console user :name (its key :name_key) of role :role, of account :account_id (NULL: an operator), with
-- the password hash :password_hash; no row when the name is taken.
INSERT INTO einmal.console_users (name, name_key, role, account_id, password_hash)
VALUES (:name, :name_key, :role, :account_id, :password_hash)
ON CONFLICT (name_key) DO NOTHING
RETURNING id
