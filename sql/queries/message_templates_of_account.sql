-- account :account_id's message templates by name
SELECT name, subject, body_text, body_html, from_address, created_at, updated_at
FROM einmal.message_templates WHERE account_id = :account_id ORDER BY name
