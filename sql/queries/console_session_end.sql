-- End the session of token hash :token_hash (logout); its user's id, or no row.
DELETE FROM einmal.console_sessions WHERE token_hash = :token_hash RETURNING user_id
