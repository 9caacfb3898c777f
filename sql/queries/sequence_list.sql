-- The sequences of account :account_id, with their list's name, their steps (not deleted) and their members on
-- the list
SELECT q.id, q.name, q.status, q.created_at, q.segment, l.name AS list,
       (SELECT count(*) FROM einmal.campaigns AS c
        WHERE c.sequence_id = q.id AND c.kind = 'step' AND c.status <> 'cancelled') AS steps,
       (SELECT count(*) FROM einmal.sequence_members AS m WHERE m.sequence_id = q.id AND m.left_at IS NULL) AS members
FROM einmal.sequences AS q JOIN einmal.lists AS l ON l.id = q.list_id
WHERE q.account_id = :account_id
ORDER BY q.id
