SELECT email, job_id, attempts, last_reply, updated_at
FROM einmal.sends
WHERE campaign_id = $1 AND status = 'in_doubt'
ORDER BY id
