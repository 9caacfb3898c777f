-- The subscriber a preview of campaign :campaign_id is rendered for: the one of its account whose mailbox key is :key
-- (service/addresses.py email_key; the spelling :spelling first), or with :key NULL the first member of the
-- campaign's lists.
SELECT s.id, s.email, s.name, s.attributes
FROM einmal.campaigns AS c
JOIN einmal.subscribers AS s ON s.account_id = c.account_id
WHERE c.id = :campaign_id AND s.status <> 'erased'
  AND CASE WHEN :key::text IS NULL
           THEN EXISTS (SELECT 1 FROM einmal.list_members m WHERE m.subscriber_id = s.id AND m.list_id = ANY (c.list_ids))
           ELSE s.email_lower = :key::text END
ORDER BY s.email = :spelling::text DESC NULLS LAST, s.id
LIMIT 1
