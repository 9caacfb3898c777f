-- claim up to $3 due rows of campaign $1 for node $2 in one statement;
-- rows whose address is suppressed are settled as 'suppressed' instead
WITH picked AS MATERIALIZED (
    SELECT s.id, sub.name, sub.attributes,
           EXISTS (SELECT 1 FROM einmal.suppressions x
                   WHERE x.account_id = s.account_id AND x.email_lower = s.email_lower) AS suppressed
    FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
    WHERE s.campaign_id = $1 AND s.status = 'queued' AND s.next_attempt_at <= now()
      AND EXISTS (SELECT 1 FROM einmal.campaigns c WHERE c.id = $1 AND c.status = 'sending')
    ORDER BY s.next_attempt_at, s.id
    LIMIT $3
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE einmal.sends s SET
    status = CASE WHEN p.suppressed THEN 'suppressed' ELSE 'claimed' END,
    claimed_by = $2,
    last_reply = CASE WHEN p.suppressed THEN 'suppressed when claimed' ELSE s.last_reply END,
    updated_at = now()
FROM picked p
WHERE s.id = p.id
RETURNING s.id, s.account_id, s.subscriber_id, s.email, s.email_lower, s.attempts, p.name, s.status,
          p.attributes
