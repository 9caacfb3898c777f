-- What a click on campaign :campaign_id's link needs (service/web/clicks.py): its account and templates, from
-- which its links are found again, and whether it is a draft (whose templates may still change: not cached);
-- no row: no such campaign. A pruned campaign's links still lead where they did (its clicks are not written).
SELECT account_id, body_text, body_html, status = 'draft' AS draft FROM einmal.campaigns WHERE id = :campaign_id
