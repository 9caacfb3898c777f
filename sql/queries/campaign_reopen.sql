-- CAS sent -> sending, so that a node picks up rows queued again by reconcile --resend or campaign retry
UPDATE einmal.campaigns SET status = 'sending', sent_at = NULL, updated_at = now()
WHERE id = $1 AND status = 'sent'
RETURNING id
