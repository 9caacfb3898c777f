-- Account $1's subscriber of mailbox key $3 (its oldest, not erased), untouched; or, when it has none, a new
-- one spelt $2 named $4. A sign-up never changes a subscriber that exists: the form is anyone's. The caller
-- holds the locks of subscriber_lock.
WITH existing AS (
    SELECT id FROM einmal.subscribers
    WHERE account_id = $1 AND email_lower = $3::text AND status <> 'erased'
    ORDER BY created_at, id LIMIT 1
), inserted AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT $1, $2::text, $3::text, $4::text
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    RETURNING id
)
SELECT id FROM existing UNION ALL SELECT id FROM inserted
