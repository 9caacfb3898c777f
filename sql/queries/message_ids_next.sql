-- :n ids of new messages' campaigns at once, for a batch (docs/design.md#messages); an id not used is a gap
SELECT nextval('einmal.message_ids') AS id FROM generate_series(1, :n::int)
