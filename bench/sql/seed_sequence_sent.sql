-- The step-1 rows of sequence $1's members past step 1, sent at their join (a delay counts from the previous step's
-- send); a statement of its own: the step's partition is made at the end of the statement that inserted its campaign
INSERT INTO einmal.sends (campaign_id, account_id, subscriber_id, email, email_lower, job_id, status, sent_at)
SELECT m.last_step, s.account_id, s.id, s.email, s.email_lower, 'campaign:' || m.last_step || ':' || s.id, 'sent',
       m.joined_at
FROM einmal.sequence_members AS m JOIN einmal.subscribers AS s ON s.id = m.subscriber_id
WHERE m.sequence_id = $1 AND m.last_step IS NOT NULL
