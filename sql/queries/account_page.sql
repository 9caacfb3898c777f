-- Account :account_id: its name and what its unsubscribe page shows.
SELECT name, display_name, language, contact FROM einmal.accounts WHERE id = :account_id
