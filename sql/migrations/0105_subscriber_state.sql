-- What a subscriber is, as einmal shows it (the CLI's `subscribers list|show`, the API's `status`), derived
-- from what decides whether it is mailed rather than kept beside it, so it cannot go stale: its mailbox
-- key's suppression first (`suppressed`: the reason, NULL when none), then whether it has only sign-ups
-- awaiting confirmation. The stored subscribers.status keeps what the recipient build reads ('erased' or not).
CREATE FUNCTION einmal.subscriber_state(subscriber bigint, suppressed text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN suppressed = 'unsubscribe' THEN 'unsubscribed'
        WHEN suppressed = 'bounce' THEN 'bounced'
        WHEN suppressed = 'complaint' THEN 'complained'
        WHEN suppressed IS NOT NULL THEN 'suppressed'
        WHEN EXISTS (SELECT 1 FROM einmal.list_members AS m WHERE m.subscriber_id = subscriber AND m.state = 'unconfirmed')
         AND NOT EXISTS (SELECT 1 FROM einmal.list_members AS m
                         WHERE m.subscriber_id = subscriber AND m.state = 'confirmed') THEN 'unconfirmed'
        ELSE 'confirmed'
    END
$$;
