-- The recipient domains holding back queued rows of campaign :campaign_id: paused after a throttle (421 4.7.x) or a
-- refusal (550 5.7.x) and not yet answered otherwise (failures > 0), each with its pause's end, the reply
-- that paused it and how many of the campaign's rows wait for it. Reads einmal.domains (a row per domain
-- ever limited or paused) first, so a campaign with no paused domain costs nothing more.
SELECT d.domain, d.paused_until, d.last_reply, q.n
FROM einmal.domains AS d
CROSS JOIN LATERAL (
    SELECT count(*) AS n
    FROM einmal.sends AS s
    WHERE s.campaign_id = :campaign_id AND s.status = 'queued' AND s.email_lower LIKE '%@' || d.domain
) AS q
WHERE d.failures > 0 AND q.n > 0
ORDER BY q.n DESC, d.domain
