-- Campaign :campaign_id over time (service/campaigns/timeline.py): its messages sent (sent_at), failed (a failed
-- row's updated_at; not the rows a cancel settled, 'campaign cancelled'), hard-bounced (each send row's first hard
-- bounce) and, when it tracks clicks, the recipients people clicked for (each one's first click tagged human),
-- counted in :buckets equal spans from its first such moment to its last. One row per (bucket, kind) with a count;
-- each row carries the span's first moment and the bucket's width in seconds. No row when nothing happened yet.
-- A pruned campaign's send rows are gone: its bounces and clicks remain.
-- One scan of the campaign's send rows, counted per kind and second first: few rows however many messages.
WITH given AS (SELECT :buckets::integer AS buckets), happened AS (
    SELECT e.kind, date_trunc('second', e.at) AS at, count(*) AS n
    FROM (
        SELECT CASE WHEN s.status = 'sent' THEN 'sent' ELSE 'failed' END AS kind,
               CASE WHEN s.status = 'sent' THEN s.sent_at ELSE s.updated_at END AS at
        FROM einmal.sends AS s
        WHERE s.campaign_id = :campaign_id
          AND (s.status = 'sent' AND s.sent_at IS NOT NULL
               OR s.status = 'failed' AND s.last_reply IS DISTINCT FROM 'campaign cancelled')
        UNION ALL
        SELECT 'bounced', min(b.created_at) FROM einmal.bounces AS b
        WHERE b.campaign_id = :campaign_id AND b.kind = 'hard' GROUP BY b.send_id
        UNION ALL
        SELECT 'clicked', min(k.at) FROM einmal.clicks AS k
        WHERE k.campaign_id = :campaign_id AND k.tag = 'human' GROUP BY k.subscriber_id
    ) AS e
    GROUP BY 1, 2
), span AS (
    SELECT min(at) AS first, greatest(extract(epoch FROM max(at) - min(at))::float8 / given.buckets, 1) AS width
    FROM happened CROSS JOIN given GROUP BY given.buckets
)
SELECT least(floor(extract(epoch FROM h.at - span.first)::float8 / span.width)::integer, given.buckets - 1) AS bucket,
       h.kind, sum(h.n)::bigint AS n, span.first, span.width
FROM happened AS h CROSS JOIN span CROSS JOIN given
GROUP BY 1, 2, span.first, span.width, given.buckets
ORDER BY 1, 2
