-- The steps of sequence :sequence_id in status :status (to pause or resume each), in order
SELECT id FROM einmal.campaigns
WHERE sequence_id = :sequence_id AND kind = 'step' AND status = :status
ORDER BY step_position
