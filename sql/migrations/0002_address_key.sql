-- The email_lower columns now hold the mailbox key of service/addresses.py
-- (email_key: NFC, Unicode case folding, the domain as its IDNA U-label),
-- computed by einmal in Python where an address enters, instead of
-- PostgreSQL's lower(), which depends on the database's LC_CTYPE and knows
-- nothing of IDNA. One mailbox, however spelled, is then one key: one send
-- row per campaign (sends_one_per_address) and one suppression.
--
-- `einmal migrate` runs this file after writing pg_temp.einmal_rekey
-- (address, key): every stored address — subscribers.email and
-- suppressions.email_lower — whose key differs from what its row holds. It
-- cannot run without that table. Rows that become one key are merged:
-- suppressions keep the oldest; the send rows of one campaign keep the one
-- furthest along (sent, then sending, in_doubt, suppressed, failed, claimed,
-- queued; the oldest row first among equals), so a 'sent' is never lost.

ANALYZE pg_temp.einmal_rekey;  -- usually empty or small: lets the planner use the indexes below

-- subscribers: the key becomes an ordinary column, written by whoever adds a subscriber
ALTER TABLE einmal.subscribers ALTER COLUMN email_lower DROP EXPRESSION;
UPDATE einmal.subscribers s SET email_lower = r.key
FROM pg_temp.einmal_rekey r
WHERE r.address = s.email AND s.email_lower IS DISTINCT FROM r.key;
ALTER TABLE einmal.subscribers ALTER COLUMN email_lower SET NOT NULL;

-- sends: every row of a key that one of the rewritten subscribers now has
CREATE TEMP TABLE einmal_rekey_sends ON COMMIT DROP AS
SELECT s.id, s.campaign_id, sub.email_lower AS key,
       row_number() OVER (
           PARTITION BY s.campaign_id, sub.email_lower
           ORDER BY array_position(ARRAY['sent', 'sending', 'in_doubt', 'suppressed', 'failed', 'claimed', 'queued'],
                                   s.status), s.id) AS rank
FROM einmal.sends s JOIN einmal.subscribers sub ON sub.id = s.subscriber_id
WHERE sub.email_lower IN (SELECT key FROM pg_temp.einmal_rekey);

DELETE FROM einmal.sends s USING einmal_rekey_sends r WHERE s.id = r.id AND r.rank > 1;
-- in two steps: a row's new key may still be another row's old one
UPDATE einmal.sends s SET email_lower = 'einmal-rekey:' || s.id
FROM einmal_rekey_sends r WHERE s.id = r.id AND s.email_lower IS DISTINCT FROM r.key;
UPDATE einmal.sends s SET email_lower = r.key
FROM einmal_rekey_sends r WHERE s.id = r.id AND s.email_lower = 'einmal-rekey:' || s.id;

-- suppressions: the key is no longer lower(); a rewritten one keeps the oldest row of its key
ALTER TABLE einmal.suppressions DROP CONSTRAINT suppressions_email_lower_check;
CREATE TEMP TABLE einmal_rekey_suppressions ON COMMIT DROP AS
SELECT x.account_id, r.key, x.reason, x.created_at
FROM einmal.suppressions x JOIN pg_temp.einmal_rekey r ON r.address = x.email_lower
WHERE r.key <> x.email_lower;

DELETE FROM einmal.suppressions x USING pg_temp.einmal_rekey r
WHERE r.address = x.email_lower AND r.key <> x.email_lower;
INSERT INTO einmal.suppressions AS x (account_id, email_lower, reason, created_at)
SELECT DISTINCT ON (account_id, key) account_id, key, reason, created_at
FROM einmal_rekey_suppressions
ORDER BY account_id, key, created_at
ON CONFLICT (account_id, email_lower) DO UPDATE
    SET created_at = least(x.created_at, excluded.created_at),
        reason = CASE WHEN excluded.created_at < x.created_at THEN excluded.reason ELSE x.reason END;
