-- The steps of sequence :sequence_id, deleted ones too (status cancelled), in order, with their send rows' counts
-- by status (one count of the step's own partition each)
SELECT c.id, c.step_position AS position, c.name, c.status, c.pause_reason, c.subject, c.from_address,
       c.step_delay_seconds AS delay_seconds, c.step_window_from AS window_from, c.step_window_to AS window_to,
       c.step_window_zone AS window_zone,
       coalesce((SELECT jsonb_object_agg(x.status, x.n)
                 FROM (SELECT s.status, count(*) AS n FROM einmal.sends AS s WHERE s.campaign_id = c.id
                       GROUP BY s.status) AS x), '{}') AS counts
FROM einmal.campaigns AS c
WHERE c.sequence_id = :sequence_id AND c.kind = 'step'
ORDER BY c.step_position
