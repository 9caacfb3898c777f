-- The title of list $2 of account $1, what the public pages call it, becomes $3 (NULL: none, the pages say
-- "the mailing list"). No row: the account has no such list.
UPDATE einmal.lists SET title = $3
WHERE account_id = $1 AND name = $2
RETURNING id, name, title
