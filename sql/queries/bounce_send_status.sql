-- The status of send row $1 of campaign $2 (the campaign: a probe of its partition alone): a report acts only on a row whose message went out (sent, sending,
-- in_doubt), never on one queued, claimed or suppressed, nor on one failed (refused, or out of tries).
SELECT status FROM einmal.sends WHERE id = $1 AND campaign_id = $2
