-- The confirmation campaign of list $1 (account $2) and its wording's version, made at its first need: kind
-- 'confirmation', 'sending' from the start with nothing to build, named after the list's title (else its
-- name: {{ campaign.name }} of the message); $3 subject, $4 From, $5 body, $6 language, $7 wording ('de-2').
-- Run after optin_campaign_lock, in its transaction; the unique index campaigns_confirmation_list backs it.
WITH made AS (
    INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status,
                                  recipients_built_at, started_at, language, wording)
    SELECT l.account_id, coalesce(l.title, l.name), $3, $4, $5, ARRAY[l.id], 'confirmation', 'sending', now(), now(),
           $6, $7
    FROM einmal.lists AS l WHERE l.id = $1 AND l.account_id = $2
    ON CONFLICT ((list_ids[1])) WHERE kind = 'confirmation' DO NOTHING
    RETURNING id, language, wording
)
SELECT id, language, wording FROM made
UNION ALL
SELECT id, language, wording FROM einmal.campaigns WHERE kind = 'confirmation' AND list_ids[1] = $1 AND account_id = $2
