-- Up to :batch messages made more than :older_than_seconds seconds ago whose row is settled (sent, failed,
-- suppressed: never one queued, claimed, sending or in doubt) deleted, with their send row and campaign, in one
-- statement (the foreign keys are checked at its end); their bounces stay, by campaign id, as a pruned campaign's
-- do (docs/design.md#messages). Returns the ids deleted.
WITH old AS (
    SELECT s.campaign_id FROM einmal.messages m
    JOIN einmal.sends s ON s.campaign_id = m.campaign_id
    WHERE m.created_at < now() - make_interval(secs => :older_than_seconds)
      AND s.status IN ('sent', 'failed', 'suppressed')
    ORDER BY m.created_at
    LIMIT :batch
    FOR UPDATE OF s SKIP LOCKED
), rows AS (
    DELETE FROM einmal.sends s USING old o
    WHERE s.campaign_id = o.campaign_id AND s.status IN ('sent', 'failed', 'suppressed')
    RETURNING s.campaign_id
), made AS (
    DELETE FROM einmal.messages m USING rows r WHERE m.campaign_id = r.campaign_id RETURNING m.campaign_id
), tallies AS (
    DELETE FROM einmal.campaign_tallies k USING made d WHERE k.campaign_id = d.campaign_id
), counts AS (
    DELETE FROM einmal.campaign_counts k USING made d WHERE k.campaign_id = d.campaign_id
)
DELETE FROM einmal.campaigns c USING made d WHERE c.id = d.campaign_id AND c.kind = 'message' RETURNING c.id
