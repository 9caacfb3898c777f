-- The first step of sequence :sequence_id past position :position, not deleted: its position and delay; no row: none
SELECT step_position AS position, step_delay_seconds AS delay_seconds FROM einmal.campaigns
WHERE sequence_id = :sequence_id AND kind = 'step' AND status <> 'cancelled' AND step_position > :position
ORDER BY step_position
LIMIT 1
