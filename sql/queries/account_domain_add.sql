-- Allow account :account_id to send from :domain (service/accounts/senders.py); no row: it already could.
INSERT INTO einmal.account_domains (account_id, domain) VALUES (:account_id, :domain)
ON CONFLICT (account_id, domain) DO NOTHING
RETURNING domain
