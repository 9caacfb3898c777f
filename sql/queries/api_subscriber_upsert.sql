-- Account $1's subscriber of mailbox key $3 (its oldest, not erased): its name set to $4 unless NULL, the
-- attributes $5 merged into its own; or, when it has none, a new one spelt $2 (status confirmed: like an
-- import, the caller asserts consent). Returns its id and whether it is new. The caller holds the locks of
-- api_subscriber_lock, so neither an import nor another upsert adds the key in another spelling meanwhile.
WITH existing AS (
    SELECT id FROM einmal.subscribers
    WHERE account_id = $1 AND email_lower = $3::text AND status <> 'erased'
    ORDER BY created_at, id LIMIT 1
    FOR UPDATE
), updated AS (
    UPDATE einmal.subscribers AS s
    SET name = coalesce($4::text, s.name), attributes = s.attributes || coalesce($5::jsonb, '{}')
    FROM existing AS e WHERE s.id = e.id
    RETURNING s.id, false AS created
), inserted AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name, attributes)
    SELECT $1, $2::text, $3::text, coalesce($4::text, ''), coalesce($5::jsonb, '{}')
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    RETURNING id, true AS created
)
SELECT id, created FROM updated UNION ALL SELECT id, created FROM inserted
