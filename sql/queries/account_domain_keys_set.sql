-- Give account :account_id's :domain the PEM :keys under :selectors (selector i with key i): a selector it has
-- gets its new key in its place, the others come after its keys. At most two in all: the table's CHECK
-- refuses more. No row: the account has no such domain. Returns nothing of the keys.
UPDATE einmal.account_domains d
   SET (selectors, keys) = (
       SELECT coalesce(array_agg(s ORDER BY o), '{}'), coalesce(array_agg(k ORDER BY o), '{}')
         FROM (SELECT coalesce(n.s, old.s) AS s, coalesce(n.k, old.k) AS k, old.o
                 FROM unnest(d.selectors, d.keys) WITH ORDINALITY AS old (s, k, o)
                 LEFT JOIN unnest(:selectors::text[], :keys::text[]) AS n (s, k) ON n.s = old.s
               UNION ALL
               SELECT n.s, n.k, 2 + n.o
                 FROM unnest(:selectors::text[], :keys::text[]) WITH ORDINALITY AS n (s, k, o)
                WHERE n.s <> ALL (d.selectors)) AS merged)
 WHERE d.account_id = :account_id AND d.domain = :domain
RETURNING d.domain
