-- The longest of :names (a From's domain and the domains it is under) given to an account other than
-- :account_id (service/mail/from_rule.py); NULL: none is, the domain is no other account's.
SELECT domain FROM einmal.account_domains
 WHERE account_id <> :account_id AND domain = ANY(:names::text[])
 ORDER BY length(domain) DESC
 LIMIT 1
