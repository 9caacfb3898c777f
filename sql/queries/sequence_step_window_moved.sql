-- After step :campaign_id's send window changed: its rows still waiting for their first attempt (queued, attempts 0)
-- are placed in the window as it now is (its next opening from now, or now when it is open or there is none; for the
-- zone 'local', in each member's own zone), as the sweep would place them today; a retry's backoff (attempts > 0) is
-- the engine's and stays. A row placed was queued at or after its delay, so now is never before it.
UPDATE einmal.sends AS d
SET next_attempt_at = einmal.step_window_open(
        c.step_window_from, c.step_window_to,
        -- 'local': the member's own zone, else the account's (migration 0146)
        CASE WHEN c.step_window_zone <> 'local' THEN c.step_window_zone
             WHEN sub.attributes ->> 'time_zone' IN (SELECT z.name FROM pg_timezone_names AS z)
                 THEN sub.attributes ->> 'time_zone'
             ELSE (SELECT a.time_zone FROM einmal.accounts AS a WHERE a.id = c.account_id) END,
        now()),
    updated_at = now()
FROM einmal.campaigns AS c, einmal.subscribers AS sub
WHERE c.id = :campaign_id AND d.campaign_id = c.id AND d.status = 'queued' AND d.attempts = 0
  AND sub.id = d.subscriber_id
