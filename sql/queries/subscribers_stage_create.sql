-- The import's staging table: COPY target for one chunk of validated rows.
-- Temporary, private to the connection, dropped with the import's transaction.
CREATE TEMP TABLE pg_temp.einmal_import (
    line      bigint NOT NULL,
    email     text NOT NULL,
    email_key text NOT NULL,
    name      text NOT NULL,
    list_name text,  -- NULL: a row on no list (only sign-ups awaiting confirmation)
    attributes jsonb NOT NULL,
    unnamed   boolean NOT NULL, -- the row names no list: list_name is `default`, for a new subscriber only
    state     text NOT NULL,    -- of its membership: 'confirmed', 'unconfirmed' (awaiting confirmation), or 'left':
                                -- the source says the person left list_name, so the row joins nothing, makes nothing
    confirmed_at timestamptz,   -- when the source says the person confirmed (NULL: it does not say)
    source    text              -- where the membership came from (list_members.source): `import:mailchimp`, …
) ON COMMIT DROP
