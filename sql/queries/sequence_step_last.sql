-- The highest position sequence :sequence_id has used (a deleted step's too; 0: none)
SELECT coalesce(max(step_position), 0) FROM einmal.campaigns WHERE sequence_id = :sequence_id AND kind = 'step'
