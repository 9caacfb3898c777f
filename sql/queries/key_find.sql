-- The account and scope of the key whose SHA-256 is :digest, unless revoked; its last use noted at most once a
-- minute (a busy client does not write the key's row on every request).
WITH k AS (
    SELECT id, account_id, scope, used_at FROM einmal.api_keys WHERE hash = :digest AND revoked_at IS NULL
), touched AS (
    UPDATE einmal.api_keys AS u SET used_at = now()
    FROM k WHERE u.id = k.id AND (k.used_at IS NULL OR k.used_at < now() - interval '1 minute')
)
SELECT id, account_id, scope FROM k
