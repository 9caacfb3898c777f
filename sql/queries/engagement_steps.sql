-- The steps of account :account_id's sequence named :name or of id :sequence_id (deleted steps too), in order, for
-- their engagement (service/engagement). No row: no such sequence; one row with NULL step columns: it has no steps.
SELECT q.id AS sequence_id, q.name, c.id AS campaign_id, c.step_position AS position, c.subject,
       c.status = 'cancelled' AS deleted
FROM einmal.sequences AS q
LEFT JOIN einmal.campaigns AS c ON c.sequence_id = q.id AND c.kind = 'step'
WHERE q.account_id = :account_id AND (q.name = :name OR q.id = :sequence_id)
ORDER BY c.step_position
