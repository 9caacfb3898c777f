-- Why a campaign is paused ('by operator', 'cannot render: …'), shown by `einmal campaign status`;
-- cleared when it is resumed.
ALTER TABLE einmal.campaigns ADD COLUMN pause_reason text;
