-- The From domains of account :account_id, by name (service/mail/from_rule.py); empty: it may use any From.
SELECT coalesce(array_agg(domain ORDER BY domain), '{}') FROM einmal.account_domains WHERE account_id = :account_id
