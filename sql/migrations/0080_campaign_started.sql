-- When a campaign started (approved -> sending, sql/queries/campaign_start.sql), for `campaign list` and
-- `campaign status`: scheduled_for is only when it may start (a draft's creation time when no --at was
-- given). Campaigns that started before this migration get the time their recipients were built, which
-- follows the start by moments, else their last change.
ALTER TABLE einmal.campaigns ADD COLUMN started_at timestamptz;
UPDATE einmal.campaigns SET started_at = coalesce(recipients_built_at, updated_at)
WHERE status IN ('sending', 'paused', 'sent') OR (status = 'cancelled' AND recipients_built_at IS NOT NULL);
