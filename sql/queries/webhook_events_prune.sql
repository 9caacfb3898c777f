-- Delete up to :limit events made more than :older_than_seconds ago that no delivery waits for (every
-- delivery delivered, or the endpoints removed); parked and pending ones stay. Returns how many.
WITH gone AS (
    DELETE FROM einmal.webhook_events e
    WHERE e.id IN (SELECT x.id FROM einmal.webhook_events x
                   WHERE x.created_at < now() - make_interval(secs => :older_than_seconds)
                     AND NOT EXISTS (SELECT 1 FROM einmal.webhook_deliveries d
                                     WHERE d.event_id = x.id AND d.state <> 'delivered')
                   ORDER BY x.created_at LIMIT :limit)
    RETURNING 1
)
SELECT count(*) FROM gone
