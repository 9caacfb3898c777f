-- account :account_id's message template :template_name made or replaced (a queued message keeps the copy it
-- was made with); whether it is new
INSERT INTO einmal.message_templates AS t (account_id, name, subject, body_text, body_html, from_address)
VALUES (:account_id, :template_name, :subject, :body_text, :body_html, :from_address)
ON CONFLICT (account_id, name) DO UPDATE SET subject = EXCLUDED.subject, body_text = EXCLUDED.body_text,
    body_html = EXCLUDED.body_html, from_address = EXCLUDED.from_address, updated_at = now()
RETURNING xmax = 0 AS created
