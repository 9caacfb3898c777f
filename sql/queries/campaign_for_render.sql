SELECT id, account_id, name, subject, from_address, body_text, body_html, reply_to, list_id, headers, kind,
       unsubscribe_required, track_clicks, track_opens
FROM einmal.campaigns WHERE id = :campaign_id
