-- Account :account_id's own sender identity: its return path, return-path secret and unsubscribe mailto,
-- its From domains with their DKIM selectors and keys, and its relays with their weights and limits, each
-- list in a stable order (service/accounts/identity.py). NULL: no account with that id.
SELECT a.return_path, a.return_path_secret, a.unsubscribe_mailto,
       coalesce((SELECT array_agg(row(d.domain, d.selectors, d.keys) ORDER BY d.domain)
                   FROM einmal.account_domains d WHERE d.account_id = a.id), '{}') AS domains,
       coalesce((SELECT array_agg(row(r.name, r.url, ar.weight, r.rate, r.quota_hour, r.quota_day) ORDER BY r.name)
                   FROM einmal.account_relays ar JOIN einmal.relays r ON r.id = ar.relay_id
                  WHERE ar.account_id = a.id), '{}') AS relays
  FROM einmal.accounts a
 WHERE a.id = :account_id
