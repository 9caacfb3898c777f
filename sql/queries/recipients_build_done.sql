UPDATE einmal.campaigns SET recipients_built_at = now(), updated_at = now()
WHERE id = :campaign_id AND recipients_built_at IS NULL
RETURNING id
