-- The name of the account :account_id and the ids of those of the named lists it has.
-- No row at all when the account is unknown; one row with NULL list when none of the lists exists.
SELECT a.name AS account_name, l.id AS list_id, l.name AS list_name
FROM einmal.accounts AS a
LEFT JOIN einmal.lists AS l ON l.account_id = a.id AND l.name = ANY (:lists::text[])
WHERE a.id = :account_id
