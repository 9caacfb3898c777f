-- Change campaign $1 of account $2 while it is a draft (compare-and-set): each column named in $3 takes its
-- value ($4 name, $5 subject, $6 from, $7 text, $8 html, $9 list ids, $10 when, NULL: at approval, $11
-- reply-to, $12 language, NULL: the account's now; $13 unsubscribe_required); the others stay. No row: it is
-- not account $2's draft (any more).
UPDATE einmal.campaigns AS c SET
    name          = CASE WHEN 'name' = ANY ($3::text[]) THEN $4 ELSE c.name END,
    subject       = CASE WHEN 'subject' = ANY ($3::text[]) THEN $5 ELSE c.subject END,
    from_address  = CASE WHEN 'from_address' = ANY ($3::text[]) THEN $6 ELSE c.from_address END,
    body_text     = CASE WHEN 'text' = ANY ($3::text[]) THEN $7 ELSE c.body_text END,
    body_html     = CASE WHEN 'html' = ANY ($3::text[]) THEN $8 ELSE c.body_html END,
    list_ids      = CASE WHEN 'lists' = ANY ($3::text[]) THEN $9::bigint[] ELSE c.list_ids END,
    scheduled_for = CASE WHEN 'at' = ANY ($3::text[]) THEN coalesce($10::timestamptz, now()) ELSE c.scheduled_for END,
    reply_to      = CASE WHEN 'reply_to' = ANY ($3::text[]) THEN $11 ELSE c.reply_to END,
    language      = CASE WHEN 'language' = ANY ($3::text[])
                         THEN coalesce($12::text, (SELECT a.language FROM einmal.accounts AS a WHERE a.id = c.account_id))
                         ELSE c.language END,
    unsubscribe_required = CASE WHEN 'unsubscribe' = ANY ($3::text[]) THEN $13::boolean
                                ELSE c.unsubscribe_required END,
    updated_at    = now()
WHERE c.id = $1 AND c.account_id = $2 AND c.status = 'draft'
RETURNING c.id
