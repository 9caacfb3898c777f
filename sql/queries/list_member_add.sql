-- Put account :account_id's subscriber of mailbox key :email_key (the spelling :email first, not erased) on its list
-- named :list_name. One row: list_id NULL when there is no such list, subscriber_id NULL when no such subscriber,
-- added true when the membership is new (confirmed: the caller asserts consent, as an import does), and its state
-- (an unconfirmed sign-up stays one: only its link confirms it).
WITH l AS (SELECT id FROM einmal.lists WHERE account_id = :account_id AND name = :list_name),
s AS (
    SELECT id FROM einmal.subscribers
    WHERE account_id = :account_id AND email_lower = :email_key AND status <> 'erased'
    ORDER BY email = :email DESC, created_at, id LIMIT 1
), added AS (
    INSERT INTO einmal.list_members (list_id, subscriber_id) SELECT l.id, s.id FROM l, s
    ON CONFLICT DO NOTHING RETURNING list_id
)
SELECT (SELECT id FROM l) AS list_id, (SELECT id FROM s) AS subscriber_id, EXISTS (SELECT 1 FROM added) AS added,
       coalesce((SELECT m.state FROM einmal.list_members m, l, s WHERE m.list_id = l.id AND m.subscriber_id = s.id),
                'confirmed') AS state
