-- Account :account_id's subscriber of mailbox key :email_key (its oldest, not erased), untouched; or, when it has
-- none, a new one spelt :email named :name. A sign-up never changes a subscriber that exists: the form is anyone's.
-- The caller holds the locks of subscriber_lock.
WITH existing AS (
    SELECT id FROM einmal.subscribers
    WHERE account_id = :account_id AND email_lower = :email_key::text AND status <> 'erased'
    ORDER BY created_at, id LIMIT 1
), inserted AS (
    INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
    SELECT :account_id, :email::text, :email_key::text, :name::text
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    RETURNING id
)
SELECT id FROM existing UNION ALL SELECT id FROM inserted
