-- The ids of account :account_id's lists among the names :names (a name it has no list of: no row).
SELECT id, name FROM einmal.lists WHERE account_id = :account_id AND name = ANY (:names::text[])
