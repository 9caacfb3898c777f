-- Lift the 'bounce' suppressions of account :account_id for the mailbox keys :email_keys that `suppressions review`
-- found made by bounces whose reason no longer suppresses. One whose mailbox bounced, or failed at send time, since
-- the review read its evidence at :began stays (that bounce may be one that suppresses: its own insert found the
-- suppression there and added nothing), as does one whose reason changed. Returns the keys lifted.
DELETE FROM einmal.suppressions AS x
WHERE x.account_id = :account_id AND x.email_lower = ANY (:email_keys::text[]) AND x.reason = 'bounce'
  AND NOT EXISTS (
      SELECT 1
      FROM einmal.campaigns AS c
      JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = x.email_lower
      LEFT JOIN einmal.bounces AS b ON b.send_id = s.id AND b.created_at >= :began
      WHERE c.account_id = x.account_id
        AND (b.id IS NOT NULL OR (s.status = 'failed' AND s.updated_at >= :began)))
RETURNING x.email_lower
