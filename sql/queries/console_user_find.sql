-- The console user of key :name_key, with its password hash, or no row.
SELECT id, name, role, account_id, password_hash FROM einmal.console_users WHERE name_key = :name_key
