-- Before migration 0002: the stored addresses whose key (service/addresses.py)
-- differs from what their row holds, with that key. Dropped at commit.
CREATE TEMP TABLE pg_temp.einmal_rekey (
    address text PRIMARY KEY,
    key     text NOT NULL
) ON COMMIT DROP
