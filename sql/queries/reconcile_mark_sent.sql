-- in_doubt -> sent: the operator decided the server accepted them
WITH moved AS (
    UPDATE einmal.sends
    SET status = 'sent', sent_at = now(), updated_at = now()
    WHERE campaign_id = $1 AND status = 'in_doubt'
    RETURNING 1
)
SELECT count(*) FROM moved
