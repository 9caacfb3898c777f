-- Change campaign :campaign_id of account :account_id while it is a draft (compare-and-set): each column named in :given takes its
-- value (:campaign_name name, :subject subject, :from_address from, :text text, :html html, :list_ids list ids, :at when, NULL: at approval, :reply_to
-- reply-to, :language language, NULL: the account's now; :unsubscribe unsubscribe_required; :local_time local time, NULL: none);
-- the others stay. No row: it is
-- not account :account_id's draft (any more).
UPDATE einmal.campaigns AS c SET
    name          = CASE WHEN 'name' = ANY (:given::text[]) THEN :campaign_name ELSE c.name END,
    subject       = CASE WHEN 'subject' = ANY (:given::text[]) THEN :subject ELSE c.subject END,
    from_address  = CASE WHEN 'from_address' = ANY (:given::text[]) THEN :from_address ELSE c.from_address END,
    body_text     = CASE WHEN 'text' = ANY (:given::text[]) THEN :text ELSE c.body_text END,
    body_html     = CASE WHEN 'html' = ANY (:given::text[]) THEN :html ELSE c.body_html END,
    list_ids      = CASE WHEN 'lists' = ANY (:given::text[]) THEN :list_ids::bigint[] ELSE c.list_ids END,
    scheduled_for = CASE WHEN 'at' = ANY (:given::text[]) THEN coalesce(:at::timestamptz, now()) ELSE c.scheduled_for END,
    reply_to      = CASE WHEN 'reply_to' = ANY (:given::text[]) THEN :reply_to ELSE c.reply_to END,
    language      = CASE WHEN 'language' = ANY (:given::text[])
                         THEN coalesce(:language::text, (SELECT a.language FROM einmal.accounts AS a WHERE a.id = c.account_id))
                         ELSE c.language END,
    unsubscribe_required = CASE WHEN 'unsubscribe' = ANY (:given::text[]) THEN :unsubscribe::boolean
                                ELSE c.unsubscribe_required END,
    local_time    = CASE WHEN 'local_time' = ANY (:given::text[]) THEN :local_time::time ELSE c.local_time END,
    updated_at    = now()
WHERE c.id = :campaign_id AND c.account_id = :account_id AND c.status = 'draft'
RETURNING c.id
