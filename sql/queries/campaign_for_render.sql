SELECT id, account_id, name, subject, from_address, body_text, body_html
FROM einmal.campaigns WHERE id = $1
