-- Every relay by name, with the accounts that send through it and their weights (the URL is masked in Python).
SELECT r.name, r.url, r.rate, r.quota_hour, r.quota_day,
       coalesce((SELECT string_agg(a.name || '=' || ar.weight, ', ' ORDER BY a.name)
                   FROM einmal.account_relays ar JOIN einmal.accounts a ON a.id = ar.account_id
                  WHERE ar.relay_id = r.id), '') AS accounts
  FROM einmal.relays r
 ORDER BY r.name
