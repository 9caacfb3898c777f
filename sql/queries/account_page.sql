-- Account :account_id: its name, what its unsubscribe page shows, and its time zone.
SELECT name, display_name, language, contact, time_zone FROM einmal.accounts WHERE id = :account_id
