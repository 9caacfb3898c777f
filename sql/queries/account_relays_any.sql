-- Whether the account sends through relays of its own (service/accounts/replies.py).
SELECT EXISTS (SELECT 1 FROM einmal.account_relays WHERE account_id = :account_id)
