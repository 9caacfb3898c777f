-- Every account's own return path and the secret that signs its VERP tokens (NULL: the environment's), for
-- the inbound listener (service/inbound/bounces.py ReturnPaths). The secret is read here and by
-- identity_of_account only.
SELECT id AS account_id, return_path, return_path_secret FROM einmal.accounts WHERE return_path IS NOT NULL
