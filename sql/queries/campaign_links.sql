-- What a click on campaign :campaign_id's link needs (service/web/clicks.py): its account and templates, from
-- which its links are found again; no row: no such campaign (or pruned, its links no longer served).
SELECT account_id, body_text, body_html FROM einmal.campaigns WHERE id = :campaign_id AND pruned_at IS NULL
