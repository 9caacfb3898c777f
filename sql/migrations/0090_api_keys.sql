-- The keys applications use for /api/v1 (docs/design.md#api). A key names one account and nothing else:
-- every request's account is its key's. Only the key's SHA-256 is kept (a key is 32 random bytes: no
-- slow hash is needed against guessing), with its first characters to tell keys apart in a listing.
CREATE TABLE einmal.api_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  bigint NOT NULL REFERENCES einmal.accounts (id),
    name        text NOT NULL DEFAULT '',
    scope       text NOT NULL CHECK (scope IN ('read', 'write')),
    prefix      text NOT NULL,
    hash        bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    used_at     timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX api_keys_account ON einmal.api_keys (account_id);
