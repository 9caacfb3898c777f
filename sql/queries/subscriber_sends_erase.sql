-- Replace subscriber :subscriber_id's address in its send rows with the placeholder :placeholder and drop replies that
-- may quote it; a row still queued will never go out: it is settled as suppressed.
UPDATE einmal.sends SET
    email = :placeholder, email_lower = :placeholder,
    status = CASE WHEN status = 'queued' THEN 'suppressed' ELSE status END,
    last_reply = CASE WHEN status = 'queued' THEN 'subscriber erased' END,
    updated_at = now()
WHERE subscriber_id = :subscriber_id
