-- A campaign's opens counted as they are written, as its clicks are (migration 0150): its figures read a few
-- rows however many opens it has. One row per campaign and tag ('*': both) with the opens and the recipients who
-- opened. Statement-level triggers on einmal.opens keep them: an insert (einmal.opens_record) and a delete
-- (erasure, a campaign deleted) move the counts by what the statement changed; a recipient's presence at a tag is
-- its opens there after the statement, against the same less the statement's change. A tag never changes.
CREATE TABLE einmal.open_counts (
    campaign_id bigint NOT NULL,
    tag         text NOT NULL CHECK (tag IN ('human', 'machine', '*')),
    total       bigint NOT NULL DEFAULT 0,  -- opens
    recipients  bigint NOT NULL DEFAULT 0,  -- recipients with at least one
    PRIMARY KEY (campaign_id, tag)
);

CREATE FUNCTION einmal.open_counts_move(campaigns bigint[], subscribers bigint[], tags text[], deltas integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- one writer of a campaign's counts at a time, in campaign order, to its commit: two statements' opens of one
    -- recipient never both count it new (the clicks' lock, 0150, with a key of the opens' own)
    PERFORM pg_advisory_xact_lock(1869636974, (c.id % 2147483647)::integer)
    FROM (SELECT DISTINCT x AS id FROM unnest(campaigns) AS x ORDER BY 1) AS c;
    WITH levels AS (
        SELECT g.campaign_id, g.subscriber_id, l.tag, g.d
        FROM unnest(campaigns, subscribers, tags, deltas) AS g (campaign_id, subscriber_id, tag, d)
        CROSS JOIN LATERAL (VALUES (g.tag), ('*')) AS l (tag)
    ), recipients AS (
        SELECT v.campaign_id, v.subscriber_id, v.tag, sum(v.d) AS d,
               (SELECT count(*) FROM einmal.opens AS o
                WHERE o.campaign_id = v.campaign_id AND o.subscriber_id = v.subscriber_id
                  AND (v.tag = '*' OR o.tag = v.tag)) AS now
        FROM levels AS v
        GROUP BY v.campaign_id, v.subscriber_id, v.tag
    )
    INSERT INTO einmal.open_counts AS n (campaign_id, tag, total, recipients)
    SELECT r.campaign_id, r.tag, sum(r.d), sum((r.now > 0)::integer - (r.now - r.d > 0)::integer)
    FROM recipients AS r
    GROUP BY r.campaign_id, r.tag
    HAVING sum(r.d) <> 0 OR sum((r.now > 0)::integer - (r.now - r.d > 0)::integer) <> 0
    ORDER BY r.campaign_id, r.tag
    ON CONFLICT (campaign_id, tag) DO UPDATE
        SET total = n.total + EXCLUDED.total, recipients = n.recipients + EXCLUDED.recipients;
END $$;

-- an open written (+1) or deleted (-1): `changed`, the statement's rows
CREATE FUNCTION einmal.open_counts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM einmal.open_counts_move(a.campaigns, a.subscribers, a.tags,
                                    array_fill(CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END, ARRAY[a.n]))
    FROM (SELECT array_agg(campaign_id) AS campaigns, array_agg(subscriber_id) AS subscribers,
                 array_agg(tag) AS tags, count(*)::integer AS n FROM changed) AS a
    WHERE a.n > 0;
    RETURN NULL;
END $$;

CREATE TRIGGER opens_counts_insert AFTER INSERT ON einmal.opens
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION einmal.open_counts_changed();
CREATE TRIGGER opens_counts_delete AFTER DELETE ON einmal.opens
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION einmal.open_counts_changed();

-- the opens written before
INSERT INTO einmal.open_counts (campaign_id, tag, total, recipients)
SELECT o.campaign_id, coalesce(o.tag, '*'), count(*), count(DISTINCT o.subscriber_id)
FROM einmal.opens AS o
GROUP BY GROUPING SETS ((o.campaign_id, o.tag), (o.campaign_id));
