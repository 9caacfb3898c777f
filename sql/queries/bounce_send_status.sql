-- The status of send row :send_id of campaign :campaign_id (the campaign: a probe of its partition alone): a report
-- acts only on a row whose message went out (sent, sending, in_doubt), never on one queued, claimed or suppressed,
-- nor on one failed (refused, or out of tries).
SELECT status FROM einmal.sends WHERE id = :send_id AND campaign_id = :campaign_id
