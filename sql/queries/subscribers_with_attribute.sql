-- The subscribers of account :account_id (not the erased) whose attribute :attribute is :value, by id after
-- :after_id, at most :limit, each as einmal.subscribers_shown shows it. Two ways, both through indexes
-- (migration 0152): the account's next :window subscribers by id (subscribers_account_id) hold :limit of them
-- when the value is common, or are all there are; else (a rarer value) the index subscribers_account_attributes
-- finds every one of the account's, and the first by id are taken. Never more than :window rows, or the rare
-- value's own, are read.
WITH near_rows AS MATERIALIZED (
    SELECT id, attributes FROM einmal.subscribers
    WHERE account_id = :account_id AND id > :after_id AND status <> 'erased'
    ORDER BY account_id, id
    LIMIT :window
), near AS (
    SELECT id FROM near_rows WHERE attributes @> jsonb_build_object(:attribute::text, :value::text)
    ORDER BY id LIMIT :limit
), enough AS (
    SELECT (SELECT count(*) FROM near) >= :limit OR (SELECT count(*) FROM near_rows) < :window AS yes
), far AS MATERIALIZED (
    SELECT id FROM einmal.subscribers
    WHERE NOT (SELECT yes FROM enough) AND status <> 'erased'
      AND einmal.account_attributes(account_id, attributes)
          @> einmal.account_attributes(:account_id, jsonb_build_object(:attribute::text, :value::text))
), page AS (
    SELECT id FROM near WHERE (SELECT yes FROM enough)
    UNION ALL
    (SELECT id FROM far WHERE id > :after_id ORDER BY id LIMIT :limit)
)
SELECT s.id, s.email, s.name, s.status, s.attributes, s.created_at, s.lists, s.unconfirmed_lists, s.suppressed
FROM page
JOIN einmal.subscribers_shown AS s ON s.id = page.id
WHERE s.account_id = :account_id
ORDER BY s.id
