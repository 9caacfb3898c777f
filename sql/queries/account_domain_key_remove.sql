-- Remove the key of :selector from account :account_id's :domain; no row: the domain has no such key.
UPDATE einmal.account_domains d
   SET (selectors, keys) = (
       SELECT coalesce(array_agg(s ORDER BY o), '{}'), coalesce(array_agg(k ORDER BY o), '{}')
         FROM unnest(d.selectors, d.keys) WITH ORDINALITY AS old (s, k, o)
        WHERE s <> :selector)
 WHERE d.account_id = :account_id AND d.domain = :domain AND :selector = ANY (d.selectors)
RETURNING d.domain
