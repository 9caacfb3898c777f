-- Change step :position of sequence :sequence_id (not deleted): each column named in :given takes its value
-- (:subject, :from_address, :text, :html, :delay_seconds, the window :window_from, :window_to, :window_zone given
-- together as 'window'); the others stay. updated_at moves, which makes every node's claimer compile the step
-- anew (actors/campaign_lane.py Templates.keep): rows claimed from then on render the new template, rows already sent
-- keep what they were sent with. The step's id and its delay; no row: no such step.
UPDATE einmal.campaigns AS c SET
    subject       = CASE WHEN 'subject' = ANY (:given::text[]) THEN :subject ELSE c.subject END,
    from_address  = CASE WHEN 'from_address' = ANY (:given::text[]) THEN :from_address ELSE c.from_address END,
    body_text     = CASE WHEN 'text' = ANY (:given::text[]) THEN :text ELSE c.body_text END,
    body_html     = CASE WHEN 'html' = ANY (:given::text[]) THEN :html ELSE c.body_html END,
    step_delay_seconds = CASE WHEN 'delay_seconds' = ANY (:given::text[]) THEN :delay_seconds::bigint
                              ELSE c.step_delay_seconds END,
    step_window_from = CASE WHEN 'window' = ANY (:given::text[]) THEN :window_from::smallint ELSE c.step_window_from END,
    step_window_to = CASE WHEN 'window' = ANY (:given::text[]) THEN :window_to::smallint ELSE c.step_window_to END,
    step_window_zone = CASE WHEN 'window' = ANY (:given::text[]) THEN :window_zone::text ELSE c.step_window_zone END,
    updated_at    = now()
WHERE c.sequence_id = :sequence_id AND c.kind = 'step' AND c.step_position = :position AND c.status <> 'cancelled'
RETURNING c.id, c.step_delay_seconds AS delay_seconds
