-- The title of list :list_name of account :account_id, what the public pages call it, becomes :title (NULL: none,
-- the pages say "the mailing list"). No row: the account has no such list.
UPDATE einmal.lists SET title = :title
WHERE account_id = :account_id AND name = :list_name
RETURNING id, name, title
