-- The confirmation campaign of list :list_id of account :account_id and its wording's version (de-2), or no row.
SELECT id, language, wording FROM einmal.campaigns
    WHERE kind = 'confirmation' AND list_ids[1] = :list_id AND account_id = :account_id
