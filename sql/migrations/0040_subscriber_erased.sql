-- An erased subscriber (`einmal subscribers delete`) has its own status, so that every view leaves it out
-- and its old unsubscribe links name nobody; the row stays, as its send rows refer to it. Rows erased
-- before are recognised by their placeholder address, which names their own id.
ALTER TABLE einmal.subscribers DROP CONSTRAINT subscribers_status_check;
ALTER TABLE einmal.subscribers ADD CONSTRAINT subscribers_status_check
    CHECK (status IN ('confirmed', 'unconfirmed', 'unsubscribed', 'bounced', 'erased'));
UPDATE einmal.subscribers SET status = 'erased' WHERE email = 'erased-' || id || '@erased.invalid';
