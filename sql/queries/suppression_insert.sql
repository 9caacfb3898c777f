-- Suppress the mailbox keys :email_keys (service/addresses.py: email_key of each
-- address) for account :account_id with reason :reason. Returns how many distinct keys were
-- given and how many of those were newly suppressed; each new row NOTIFYs
-- einmal_suppression through the table's trigger.
WITH given AS (
    SELECT DISTINCT key AS email_lower FROM unnest(:email_keys::text[]) AS key
), added AS (
    INSERT INTO einmal.suppressions (account_id, email_lower, reason)
    SELECT :account_id::bigint, email_lower, :reason FROM given
    -- a stronger reason replaces an unsubscribe, which transactional messages pass (docs/design.md#messages)
    ON CONFLICT (account_id, email_lower) DO UPDATE SET reason = EXCLUDED.reason
        WHERE einmal.suppressions.reason = 'unsubscribe' AND EXCLUDED.reason IN ('bounce', 'complaint')
    RETURNING xmax = 0 AS inserted
)
SELECT (SELECT count(*) FROM given) AS given, (SELECT count(*) FROM added WHERE inserted) AS added
