-- Lock the send rows of subscriber $1 (a claim skips locked rows) and return their states.
SELECT status FROM einmal.sends WHERE subscriber_id = $1 FOR UPDATE
