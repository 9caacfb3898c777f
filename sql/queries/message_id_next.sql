-- the id of a new message's campaign: from 2^52 up (docs/design.md#messages)
SELECT nextval('einmal.message_ids')
