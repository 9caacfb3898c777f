-- Fresh planner statistics for einmal.sends once a build has added rows (docs/design.md §7): the plans
-- each connection caches for the claim and for send_advance are made for the table as the statistics
-- describe it, and a table they last saw empty or small is read whole (a sequential scan per statement)
-- where the primary key finds the group's rows. ANALYZE samples a bounded number of rows, whatever the
-- table's size, and makes every session plan its statements again.
ANALYZE einmal.sends
