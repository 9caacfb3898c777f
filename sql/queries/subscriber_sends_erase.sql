-- Replace subscriber $1's address in its send rows with the placeholder $2 and drop replies that
-- may quote it; a row still queued will never go out: it is settled as suppressed.
UPDATE einmal.sends SET
    email = $2, email_lower = $2,
    status = CASE WHEN status = 'queued' THEN 'suppressed' ELSE status END,
    last_reply = CASE WHEN status = 'queued' THEN 'subscriber erased' END,
    updated_at = now()
WHERE subscriber_id = $1
