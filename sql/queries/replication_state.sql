-- What the promise needs of replication (docs/design.md#liveness): the standbys streaming from this server
-- (logical walsenders and base backups are not standbys), how many of them the server holds commits
-- for (sync or quorum), how many it hides from this role (without pg_read_all_stats, pg_monitor or
-- superuser their columns are NULL), whether this session's commits wait for them at all, and the
-- server's identity: its system identifier and its current timeline, so that a node reconnecting to a
-- promoted standby knows it met a new primary. The timeline is that of the WAL being written, which a
-- promotion changes at once (pg_control_checkpoint's changes only at the next checkpoint). And how far
-- the standbys' replay is behind (NULL: caught up and idle), which the journal's window must cover.
SELECT count(*) FILTER (WHERE r.state IS DISTINCT FROM 'backup') AS standbys,
       count(*) FILTER (WHERE r.sync_state IN ('sync', 'quorum')) AS synchronous,
       count(*) FILTER (WHERE r.sync_state IS NULL) AS hidden,
       current_setting('synchronous_standby_names') <> '' AS names_set,
       current_setting('synchronous_commit') AS synchronous_commit,
       extract(epoch FROM max(r.replay_lag))::float8 AS lag_seconds,
       (SELECT system_identifier FROM pg_control_system()) AS system_identifier,
       CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline
FROM pg_stat_replication r
WHERE r.pid NOT IN (SELECT active_pid FROM pg_replication_slots WHERE slot_type = 'logical' AND active_pid IS NOT NULL)
