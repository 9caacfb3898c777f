-- Step :position of sequence :sequence_id (account :account_id, list :list_id): a campaign of kind 'step' targeting
-- the list, built from the start (no recipient build runs) and 'sending' (:paused: 'paused', the sequence being
-- paused); :delay_seconds after a member's join, in the window [:window_from, :window_to) of :window_zone (NULL:
-- any time); :track_clicks: its links tracked. No row: the position is taken (a deleted step's too).
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, body_html, list_ids, kind, status,
                              pause_reason, recipients_built_at, started_at, reply_to, headers, language,
                              sequence_id, step_position, step_delay_seconds, step_window_from, step_window_to,
                              step_window_zone, track_clicks)
VALUES (:account_id, :step_name, :subject, :from_address, :text, :html, ARRAY[:list_id::bigint], 'step',
        CASE WHEN :paused::boolean THEN 'paused' ELSE 'sending' END,
        CASE WHEN :paused::boolean THEN 'sequence paused' END, now(), now(), :reply_to, '[]'::jsonb,
        coalesce(:language::text, (SELECT language FROM einmal.accounts WHERE id = :account_id)),
        :sequence_id, :position, :delay_seconds, :window_from, :window_to, :window_zone,
        :track_clicks)
ON CONFLICT (sequence_id, step_position) WHERE kind = 'step' DO NOTHING
RETURNING id
