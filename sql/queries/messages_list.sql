-- Account :account_id's transactional messages below id :before, newest first, :limit of them: each with its
-- recipient, subject and its send row's state.
SELECT m.campaign_id AS id, m.template, m.created_at, c.subject, s.email, s.status, s.sent_at
FROM einmal.messages m
JOIN einmal.campaigns c ON c.id = m.campaign_id
JOIN einmal.sends s ON s.campaign_id = m.campaign_id
WHERE m.account_id = :account_id AND m.campaign_id < :before AND s.campaign_id >= 4503599627370496
ORDER BY m.campaign_id DESC
LIMIT :limit
