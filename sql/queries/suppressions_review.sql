-- What made each 'bounce' suppression of the account :account_id: every bounce of its mailbox recorded in
-- einmal.bounces (kind, status, reason; no reason before migration 0030) and every failed send row of it with a 5xx
-- reply (a bounce at send time: source 'reply', its reply as status). One row per piece of evidence; a suppression
-- with none is not returned. `began`: when this was read, for suppressions_lift. Read through sends_one_per_address,
-- one probe per campaign of the account and suppression, then bounces_send: no scan of the account's other rows.
SELECT x.email_lower, x.created_at, e.source, e.kind, e.status, e.reason, statement_timestamp() AS began
FROM einmal.suppressions AS x
CROSS JOIN LATERAL (
    SELECT 'bounce' AS source, b.kind, b.status, b.reason, b.created_at AS at
    FROM einmal.campaigns AS c
    JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = x.email_lower
    JOIN einmal.bounces AS b ON b.send_id = s.id
    WHERE c.account_id = x.account_id AND b.kind <> 'complaint'
    UNION ALL
    SELECT 'reply', 'hard', s.last_reply, NULL, s.updated_at
    FROM einmal.campaigns AS c
    JOIN einmal.sends AS s ON s.campaign_id = c.id AND s.email_lower = x.email_lower
    WHERE c.account_id = x.account_id AND s.status = 'failed' AND s.last_reply ~ '^5[0-9][0-9]'
) AS e
WHERE x.account_id = :account_id AND x.reason = 'bounce'
ORDER BY x.created_at, x.email_lower, e.at
