-- Fresh planner statistics for campaign :campaign_id's rows once a build has added them (docs/design.md#recipient-build): the plans
-- each connection caches for the claim and for send_advance are made for the table as the statistics
-- describe it, and a table they last saw empty or small is read whole (a sequential scan per statement)
-- where the primary key finds the group's rows. ANALYZE samples a bounded number of rows, whatever the
-- table's size, and makes every session plan its statements on it again. Only the campaign's partition is
-- read (einmal.sends_analyze, migration 0054; docs/design.md#retention).
SELECT einmal.sends_analyze(:campaign_id)
