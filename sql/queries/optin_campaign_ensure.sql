-- The confirmation campaign of list :list_id (account :account_id) and its wording's version, made at its first
-- need: kind 'confirmation', 'sending' from the start with nothing to build, named after the list's title (else its
-- name: {{ campaign.name }} of the message); :subject subject, :from_address From, :body_text body, :language
-- language, :wording wording ('de-2'). Run after campaign_partition_lock, in its transaction (a second sign-up
-- waits there holding nothing, not on the unique index while the partition is attached); the unique index
-- campaigns_confirmation_list backs it.
WITH made AS (
    INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids, kind, status,
                                  recipients_built_at, started_at, language, wording)
    SELECT l.account_id, coalesce(l.title, l.name), :subject, :from_address, :body_text, ARRAY[l.id],
           'confirmation', 'sending', now(), now(), :language, :wording
    FROM einmal.lists AS l WHERE l.id = :list_id AND l.account_id = :account_id
    ON CONFLICT ((list_ids[1])) WHERE kind = 'confirmation' DO NOTHING
    RETURNING id, language, wording
)
SELECT id, language, wording FROM made
UNION ALL
SELECT id, language, wording FROM einmal.campaigns
    WHERE kind = 'confirmation' AND list_ids[1] = :list_id AND account_id = :account_id
