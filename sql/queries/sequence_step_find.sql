-- Step :position of sequence :sequence_id, not deleted: its campaign id and status; no row: none
SELECT id, status FROM einmal.campaigns
WHERE sequence_id = :sequence_id AND kind = 'step' AND step_position = :position AND status <> 'cancelled'
