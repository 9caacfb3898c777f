-- Remove :domain, with its DKIM keys, from account :account_id's From domains; no row: it had no such domain.
DELETE FROM einmal.account_domains WHERE account_id = :account_id AND domain = :domain RETURNING domain
