-- Domains given to two accounts, or one under another's, as an installation may hold from before a domain was
-- reserved to one account (migration 0120): each pair once, by name (service/mail/from_rule.py).
SELECT a.name AS account, d.domain, b.name AS other, e.domain AS other_domain
  FROM einmal.account_domains d
  JOIN einmal.account_domains e ON e.account_id > d.account_id
       AND (e.domain = d.domain
            OR right(e.domain, length(d.domain) + 1) = '.' || d.domain
            OR right(d.domain, length(e.domain) + 1) = '.' || e.domain)
  JOIN einmal.accounts a ON a.id = d.account_id
  JOIN einmal.accounts b ON b.id = e.account_id
 ORDER BY d.domain, e.domain
