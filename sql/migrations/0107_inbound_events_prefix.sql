-- The one-click unsubscribes of one campaign, counted for `campaign status` by their event ids'
-- prefix (`unsubscribe:<account>.<campaign>.`, service/web/app.py): a range scan of this index, with the
-- text_pattern_ops comparisons (~>=~, ~<~) that order bytes, whatever the database's collation.
CREATE INDEX inbound_events_prefix ON einmal.inbound_events (event_id text_pattern_ops);
