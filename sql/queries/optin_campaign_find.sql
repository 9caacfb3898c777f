-- The confirmation campaign of list $1 of account $2 and its language, or no row.
SELECT id, language FROM einmal.campaigns WHERE kind = 'confirmation' AND list_ids[1] = $1 AND account_id = $2
