-- Erase subscriber :subscriber_id's data: off every list, its address replaced by the placeholder :placeholder, no
-- name, no attributes, status erased: no view shows it. The row stays (send rows refer to it).
WITH off_lists AS (
    DELETE FROM einmal.list_members WHERE subscriber_id = :subscriber_id
)
UPDATE einmal.subscribers SET email = :placeholder, email_lower = :placeholder, name = '', attributes = '{}',
    status = 'erased'
WHERE id = :subscriber_id
