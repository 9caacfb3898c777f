-- Who may enter the operator's console (service/users/, docs/guide/console.md): an operator of the
-- installation (every account) or a member of one account. Only an argon2 hash of a password is kept.
CREATE TABLE einmal.console_users (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text NOT NULL,                 -- an email address or a name, as given
    name_key             text NOT NULL UNIQUE,          -- lower(name): one user per spelling
    role                 text NOT NULL CHECK (role IN ('operator', 'member')),
    account_id           bigint REFERENCES einmal.accounts (id) ON DELETE CASCADE,
    password_hash        text NOT NULL,                 -- argon2id, PHC string
    created_at           timestamptz NOT NULL DEFAULT now(),
    password_changed_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((role = 'member') = (account_id IS NOT NULL))
);

-- A signed-in browser: only the SHA-256 of its random token is kept, so the table gives no way in. A
-- session ends when it is idle or old past the console's limits, at logout, and when its user's password
-- changes or the user is removed (ON DELETE CASCADE).
CREATE TABLE einmal.console_sessions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE,
    user_id     bigint NOT NULL REFERENCES einmal.console_users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_user ON einmal.console_sessions (user_id);
