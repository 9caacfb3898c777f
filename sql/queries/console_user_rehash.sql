-- The same password, hashed again with today's parameters (argon2's check_needs_rehash): its sessions stay.
UPDATE einmal.console_users SET password_hash = :password_hash WHERE id = :user_id
