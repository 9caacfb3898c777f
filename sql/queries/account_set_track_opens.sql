-- Whether account :account_id's new campaigns track opens unless they say (`einmal accounts set --track-opens`).
UPDATE einmal.accounts SET track_opens = :track_opens WHERE id = :account_id
