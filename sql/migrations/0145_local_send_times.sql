-- Local send times (docs/design.md#recipient-build, "Local send times"): a campaign made with a local time
-- (`--local-time 09:00`, "local_time") goes out at that time in each recipient's time zone, the subscriber's
-- `time_zone` attribute when PostgreSQL knows it by that name (pg_timezone_names), else the account's
-- `time_zone`. The build gives each row its not-before in `next_attempt_at`, which the claim already takes
-- in order from the partial index sends_claimable (campaign_id, next_attempt_at, id), never reading a row
-- whose time has not come.
ALTER TABLE einmal.accounts ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC';
ALTER TABLE einmal.campaigns ADD COLUMN local_time time;

-- The rows a build gave the account's time zone because the subscriber's `time_zone` attribute was set to a
-- name PostgreSQL does not know: counted by the chunk that inserted them (a chunk built twice adds nothing).
-- A table of its own, not a column of the campaign, whose row every chunk holds FOR SHARE.
CREATE TABLE einmal.local_time_fallbacks (
    campaign_id bigint PRIMARY KEY REFERENCES einmal.campaigns (id),
    n           bigint NOT NULL CHECK (n >= 0)
);

-- The first moment at or after `after` when the clock in `zone` shows `at_time`: today's, else tomorrow's
-- (a local date plus a time, so a day with a DST change is 23 or 25 hours long and the time stays the same).
-- A local time the change skips (02:30 on the night clocks go forward) is read as PostgreSQL reads it, an hour
-- later.
CREATE FUNCTION einmal.local_time_next(at_time time, zone text, after timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN t.today >= after THEN t.today
                ELSE ((after AT TIME ZONE zone)::date + 1 + at_time) AT TIME ZONE zone END
    FROM (SELECT ((after AT TIME ZONE zone)::date + at_time) AT TIME ZONE zone AS today) AS t
$$;
