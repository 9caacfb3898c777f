-- Lift the 'bounce' suppressions of account $1 for the mailbox keys $2 that `suppressions review` found
-- made by bounces whose reason no longer suppresses. One whose mailbox bounced, or failed at send time,
-- since the review read its evidence at $3 stays (that bounce may be one that suppresses: its own insert
-- found the suppression there and added nothing), as does one whose reason changed. Returns the keys lifted.
DELETE FROM einmal.suppressions AS x
WHERE x.account_id = $1 AND x.email_lower = ANY ($2::text[]) AND x.reason = 'bounce'
  AND NOT EXISTS (
      SELECT 1
      FROM einmal.campaigns AS c
      JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = x.email_lower
      LEFT JOIN einmal.bounces AS b ON b.send_id = s.id AND b.created_at >= $3
      WHERE c.account_id = x.account_id
        AND (b.id IS NOT NULL OR (s.status = 'failed' AND s.updated_at >= $3)))
RETURNING x.email_lower
