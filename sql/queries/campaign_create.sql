-- A new draft. :at NULL: send as soon as it is approved. :headers: JSON array of [name, value] headers.
-- :language: the language of its unsubscribe page (NULL: the account's now, recorded: a later change of the
-- account's language leaves the pages of mail already sent as they were). :unsubscribe: false when it may go out
-- without a one-click unsubscribe (--no-unsubscribe; NULL: true). :track_clicks: its links tracked (--track-clicks).
-- :track_opens: its opens tracked (--track-opens; NULL: as the account's default).
-- :segment, :segment_rule: the segment that narrows its lists and its rule as it is now (both NULL: none).
-- :local_time: the time of day it goes out at in each recipient's time zone (NULL: at once; migration 0145).
INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, body_html, list_ids, scheduled_for,
                              reply_to, list_id, headers, language, unsubscribe_required,
                              track_clicks, track_opens, segment, segment_rule, local_time)
VALUES (:account_id, :campaign_name, :subject, :from_address, :text, :html, :list_ids::bigint[], coalesce(:at::timestamptz, now()), :reply_to, :list_id, :headers::jsonb,
        coalesce(:language::text, (SELECT language FROM einmal.accounts WHERE id = :account_id)), coalesce(:unsubscribe::boolean, true),
        coalesce(:track_clicks::boolean, false),
        coalesce(:track_opens::boolean, (SELECT track_opens FROM einmal.accounts WHERE id = :account_id)), :segment, :segment_rule::jsonb,
        :local_time::time)
RETURNING id
