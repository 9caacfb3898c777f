-- What the page of an unsubscribe token (:account_id account, :campaign_id campaign, :subscriber_id subscriber)
-- shows, or no row when the account is gone. The subscriber's columns are NULL when the subscriber is not the
-- account's, or was erased (its old links name nobody); the campaign's when the campaign is gone or not the
-- account's. `suppressed`: the address gets no more mail from the account (a revisit says "already unsubscribed").
-- The account's name is the operator's: not read, so never shown.
SELECT s.email, s.name, s.attributes, a.display_name, a.contact,
       coalesce(c.language, a.language) AS language, c.name AS campaign_name, c.subject, c.from_address,
       EXISTS (SELECT 1 FROM einmal.suppressions AS x
               WHERE x.account_id = a.id AND x.email_lower = s.email_lower) AS suppressed
FROM einmal.accounts AS a
LEFT JOIN einmal.subscribers AS s ON s.account_id = a.id AND s.id = :subscriber_id AND s.status <> 'erased'
LEFT JOIN einmal.campaigns AS c ON c.id = :campaign_id AND c.account_id = a.id
WHERE a.id = :account_id
