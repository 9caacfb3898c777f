-- message :campaign_id of account :account_id (another account's: no row), with its send row and its bounces
SELECT m.campaign_id AS id, m.template, m.data::text AS data, m.honour_unsubscribe, m.created_at,
       c.subject, c.from_address, s.email, s.status, s.attempts, s.last_reply, s.sent_at, s.updated_at,
       coalesce((SELECT array_agg(b.kind || coalesce(': ' || b.reason, '') ORDER BY b.id) FROM einmal.bounces b
                 WHERE b.campaign_id = m.campaign_id), '{}') AS bounces
FROM einmal.messages m
JOIN einmal.campaigns c ON c.id = m.campaign_id
JOIN einmal.sends s ON s.campaign_id = m.campaign_id
WHERE m.campaign_id = :campaign_id AND m.account_id = :account_id AND m.campaign_id >= 4503599627370496
