-- Lock the send rows of subscriber :subscriber_id (a claim skips locked rows) and return their states.
SELECT status FROM einmal.sends WHERE subscriber_id = :subscriber_id FOR UPDATE
