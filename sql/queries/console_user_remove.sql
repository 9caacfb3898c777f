-- Remove the console user of key :name_key (its sessions go with it); its account, or no row.
DELETE FROM einmal.console_users WHERE name_key = :name_key RETURNING id, account_id, name
