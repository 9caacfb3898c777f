-- Double opt-in (docs/design.md#api "Double opt-in"). A membership is 'unconfirmed' from a sign-up
-- (POST /api/v1/subscribe, the hosted form) until its confirmation link is pressed; every membership made
-- before, and every one an import or the API's PUT makes, is 'confirmed' (they assert consent). Campaigns
-- go to confirmed members only (recipients_build_chunk.sql). The consent record is kept on the membership:
-- where the sign-up came from and the wording of the message it got, and when, from which address and with
-- which user agent it was confirmed.
ALTER TABLE einmal.list_members
    ADD COLUMN state text NOT NULL DEFAULT 'confirmed',
    ADD COLUMN source text,
    ADD COLUMN wording text,
    ADD COLUMN confirmed_at timestamptz,
    ADD COLUMN confirmed_ip inet,
    ADD COLUMN confirmed_agent text;
-- NOT VALID: every existing row holds the default; no scan under this migration's lock
ALTER TABLE einmal.list_members
    ADD CONSTRAINT list_members_state CHECK (state IN ('unconfirmed', 'confirmed')) NOT VALID;
-- the pruner's walk: unconfirmed members, oldest first (few)
CREATE INDEX list_members_unconfirmed ON einmal.list_members (created_at) WHERE state = 'unconfirmed';

-- A list's confirmation messages are the send rows of one campaign of kind 'confirmation', made at the
-- list's first sign-up, always 'sending' (campaign_finish.sql never finishes it): its
-- UNIQUE (campaign_id, subscriber_id) is the one confirmation per (list, mailbox).
ALTER TABLE einmal.campaigns
    ADD COLUMN kind text NOT NULL DEFAULT 'campaign';
ALTER TABLE einmal.campaigns
    ADD CONSTRAINT campaigns_kind CHECK (kind IN ('campaign', 'confirmation')) NOT VALID;
CREATE UNIQUE INDEX campaigns_confirmation_list ON einmal.campaigns ((list_ids[1])) WHERE kind = 'confirmation';
