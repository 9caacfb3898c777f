-- Sequence :sequence_id's members by the position of the step they had last (0: none yet): on the list, and left
SELECT last_position, count(*) FILTER (WHERE left_at IS NULL) AS active, count(*) FILTER (WHERE left_at IS NOT NULL) AS gone
FROM einmal.sequence_members
WHERE sequence_id = :sequence_id
GROUP BY last_position
ORDER BY last_position
