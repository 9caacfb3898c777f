-- CAS sequence :sequence_id's status from :from_status to :to_status (the sweep walks running sequences only)
UPDATE einmal.sequences SET status = :to_status
WHERE id = :sequence_id AND status = :from_status
RETURNING id
