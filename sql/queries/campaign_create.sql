-- A new draft. $8 NULL: send as soon as it is approved. $11: JSON array of [name, value] headers.
-- $12: the language of its unsubscribe page (NULL: the account's now, recorded: a later change of the
-- account's language leaves the pages of mail already sent as they were). $13: false when it may go out
-- without a one-click unsubscribe (--no-unsubscribe; NULL: true).
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, body_html, list_ids, scheduled_for,
                              reply_to, list_id, headers, language, unsubscribe_required)
VALUES ($1, $2, $3, $4, $5, $6, $7::bigint[], coalesce($8::timestamptz, now()), $9, $10, $11::jsonb,
        coalesce($12::text, (SELECT language FROM einmal.accounts WHERE id = $1)), coalesce($13::boolean, true))
RETURNING id
