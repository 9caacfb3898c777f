-- A sequence narrowed by a segment (docs/design.md#sequences, docs/guide/sequences.md): it keeps the segment's name
-- and its rule as they were when it was made (as a campaign to a segment does, 0129), and each step goes to the
-- members the rule takes when the step falls due; a member it does not take then is passed over for that step
-- (never sent it, not offered it again) and goes on to the next. `passed_at`: when the member's last step was
-- passed over, from which the next step's delay counts (NULL: its last step was sent, or none yet).
ALTER TABLE einmal.sequences ADD COLUMN segment text, ADD COLUMN segment_rule jsonb,
    ADD CONSTRAINT sequences_segment CHECK ((segment IS NULL) = (segment_rule IS NULL));
ALTER TABLE einmal.sequence_members ADD COLUMN passed_at timestamptz;
