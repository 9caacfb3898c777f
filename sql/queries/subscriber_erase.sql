-- Erase subscriber $1's data: off every list, its address replaced by the placeholder $2, no
-- name, no attributes, status erased: no view shows it. The row stays (send rows refer to it).
WITH off_lists AS (
    DELETE FROM einmal.list_members WHERE subscriber_id = $1
)
UPDATE einmal.subscribers SET email = $2, email_lower = $2, name = '', attributes = '{}', status = 'erased'
WHERE id = $1
