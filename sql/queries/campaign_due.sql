-- approved campaigns whose time has come
SELECT id FROM einmal.campaigns
WHERE status = 'approved' AND scheduled_for <= now()
ORDER BY scheduled_for, id
