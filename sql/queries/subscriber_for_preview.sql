-- The subscriber a preview of campaign $1 is rendered for: the one of its account whose mailbox key is $2
-- (service/addresses.py email_key; the spelling $3 first), or with $2 NULL the first member of the
-- campaign's lists.
SELECT s.id, s.email, s.name, s.attributes
FROM einmal.campaigns AS c
JOIN einmal.subscribers AS s ON s.account_id = c.account_id
WHERE c.id = $1 AND s.status <> 'erased'
  AND CASE WHEN $2::text IS NULL
           THEN EXISTS (SELECT 1 FROM einmal.list_members m WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
           ELSE s.email_lower = $2::text END
ORDER BY s.email = $3::text DESC NULLS LAST, s.id
LIMIT 1
