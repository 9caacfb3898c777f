-- How many accounts there are, and how many of them were given no From domain (service/mail/from_rule.py).
SELECT count(*) AS accounts,
       count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM einmal.account_domains d WHERE d.account_id = a.id)) AS unbound
  FROM einmal.accounts a
