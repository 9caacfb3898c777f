-- Segments (docs/guide/segments.md): a saved, named rule of an account over its subscribers' attributes,
-- memberships, subscription dates and the campaigns they were sent, kept as its typed JSON rule
-- (service/segments/rules.py checks and compiles it; no SQL of a user is ever stored or run).
CREATE TABLE einmal.segments (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    name        text NOT NULL,
    rule        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);

-- A campaign to a segment (alone, or narrowing its lists) keeps the segment's name and its rule as they were
-- when the campaign was created or changed: a later change or deletion of the segment leaves a campaign's
-- recipients as its draft said, and a build resumed after a crash reads the same rule.
ALTER TABLE einmal.campaigns
    ADD COLUMN segment text,
    ADD COLUMN segment_rule jsonb,
    ADD CONSTRAINT campaigns_segment CHECK ((segment IS NULL) = (segment_rule IS NULL)) NOT VALID;  -- new rows only: no scan
