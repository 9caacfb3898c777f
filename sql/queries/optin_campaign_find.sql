-- The confirmation campaign of list $1 of account $2 and its wording's version (de-2), or no row.
SELECT id, language, wording FROM einmal.campaigns WHERE kind = 'confirmation' AND list_ids[1] = $1 AND account_id = $2
