-- Record a batch of clicks (service/web/clicks.py): parallel arrays, one element per click; tag, revise and
-- emit message.clicked as sql/migrations/0135_clicks.sql says. Returns how many clicks were new.
SELECT einmal.clicks_record(:ids::text[], :accounts::bigint[], :campaigns::bigint[], :subscribers::bigint[],
                            :links::integer[], :urls::text[], :ats::timestamptz[], :said::text[], :counts::integer[],
                            make_interval(secs => :early_seconds), make_interval(secs => :burst_seconds),
                            make_interval(secs => :repeat_seconds))
