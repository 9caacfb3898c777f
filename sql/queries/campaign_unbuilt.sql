-- campaigns whose recipient build has not finished (another node may have died building)
SELECT id FROM einmal.campaigns WHERE status IN ('sending', 'paused') AND recipients_built_at IS NULL
