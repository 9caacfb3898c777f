-- Record a batch of opens (service/web/opens.py): parallel arrays, one element per open; tag and emit
-- message.opened as sql/migrations/0142_opens.sql says. Returns how many opens were new.
SELECT einmal.opens_record(:ids::text[], :accounts::bigint[], :campaigns::bigint[], :subscribers::bigint[],
                           :ats::timestamptz[], :said::text[], make_interval(secs => :early_seconds),
                           make_interval(secs => :repeat_seconds))
