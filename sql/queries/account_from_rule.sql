-- What the From rule reads of account :account_id for one From (service/mail/from_rule.py), in one round trip:
-- its From domains by name (empty: it may use any From), and the longest of :names (the From's domain and the
-- domains it is under) given to another account (NULL: none is).
SELECT coalesce((SELECT array_agg(domain ORDER BY domain) FROM einmal.account_domains
                  WHERE account_id = :account_id), '{}') AS own,
       (SELECT domain FROM einmal.account_domains
         WHERE account_id <> :account_id AND domain = ANY(:names::text[])
         ORDER BY length(domain) DESC
         LIMIT 1) AS taken
