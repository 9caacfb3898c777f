-- After an operator queued rows of campaign :campaign_id again (a resend of its in-doubt rows, a retry of its failed
-- ones), in that transaction: when it is a sequence's step, its queued rows of subscribers who are no longer
-- confirmed members of the sequence's list are settled as the leave trigger settles them ('suppressed', 'left the
-- list'): a member who left gets no step, whoever queues it. The rows settled.
WITH settled AS (
    UPDATE einmal.sends AS d
    SET status = 'suppressed', claimed_by = NULL, last_reply = 'left the list', updated_at = now()
    FROM einmal.campaigns AS c, einmal.sequences AS q
    WHERE c.id = :campaign_id AND c.kind = 'step' AND q.id = c.sequence_id
      AND d.campaign_id = c.id AND d.status = 'queued'
      AND NOT EXISTS (SELECT 1 FROM einmal.list_members AS lm
                      WHERE lm.list_id = q.list_id AND lm.subscriber_id = d.subscriber_id AND lm.state = 'confirmed')
    RETURNING 1
)
SELECT count(*) FROM settled
