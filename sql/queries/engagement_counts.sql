-- The engagement of account :account_id's subjects :subjects ('campaign:<id>', 'template:<name>';
-- sql/migrations/0148_engagement.sql), one row each in the order given, whatever the number of their send rows: a
-- campaign's (or a step's) delivered and rejected from einmal.campaign_tallies (every source but the resume's), a
-- template's from einmal.engagement; bounced (rejected at send time, or a hard bounce after), complained and
-- unsubscribed from einmal.engagement.
SELECT s.subject,
       (coalesce(t.delivered, 0) + coalesce(e.delivered, 0))::bigint AS delivered,
       (coalesce(t.rejected, 0) + coalesce(e.rejected, 0) + coalesce(e.bounced, 0))::bigint AS bounced,
       coalesce(e.complained, 0)::bigint AS complained, coalesce(e.unsubscribed, 0)::bigint AS unsubscribed
FROM unnest(:subjects::text[]) WITH ORDINALITY AS s (subject, k)
LEFT JOIN LATERAL (
    SELECT sum(x.delivered) AS delivered, sum(x.rejected) AS rejected, sum(x.bounced) AS bounced,
           sum(x.complained) AS complained, sum(x.unsubscribed) AS unsubscribed
    FROM einmal.engagement AS x WHERE x.account_id = :account_id AND x.subject = s.subject
) AS e ON true
LEFT JOIN LATERAL (
    SELECT sum(y.delivered) AS delivered, sum(y.rejected) AS rejected
    FROM einmal.campaign_tallies AS y
    WHERE y.campaign_id = CASE WHEN s.subject LIKE 'campaign:%' THEN substr(s.subject, 10)::bigint END
      AND y.source <> 'resumed'
) AS t ON true
ORDER BY s.k
