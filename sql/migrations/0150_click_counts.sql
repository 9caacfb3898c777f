-- A campaign's clicks counted as they are written (docs/design.md#engagement): its figures read a few rows however
-- many clicks and send rows it has. One row per campaign, link and tag — link -1: every link; tag '*': both — with
-- the clicks and the recipients who clicked. Statement-level triggers on einmal.clicks keep them: an insert (a click
-- recorded), an update (a tag the revision changed) and a delete (erasure, a campaign deleted) each move the counts
-- by what the statement changed; a recipient's presence at a level is its clicks there after the statement, against
-- the same less the statement's change.
CREATE TABLE einmal.click_counts (
    campaign_id bigint NOT NULL,
    link        integer NOT NULL CHECK (link >= -1),
    url         text NOT NULL,
    tag         text NOT NULL CHECK (tag IN ('human', 'machine', '*')),
    total       bigint NOT NULL DEFAULT 0,  -- clicks
    recipients  bigint NOT NULL DEFAULT 0,  -- recipients with at least one
    PRIMARY KEY (campaign_id, link, tag)
);

CREATE FUNCTION einmal.click_counts_move(campaigns bigint[], subscribers bigint[], links integer[], urls text[],
                                         tags text[], deltas integer[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- one writer of a campaign's counts at a time, in campaign order, to its commit: the insert and the revision of
    -- one batch, and another node's batch, never lock the counts' rows in crossed orders
    PERFORM pg_advisory_xact_lock(1668048748, (c.id % 2147483647)::integer)
    FROM (SELECT DISTINCT x AS id FROM unnest(campaigns) AS x ORDER BY 1) AS c;
    WITH change AS (
        SELECT * FROM unnest(campaigns, subscribers, links, urls, tags, deltas)
            AS g (campaign_id, subscriber_id, link, url, tag, d)
    ), levels AS (
        SELECT g.campaign_id, g.subscriber_id, l.link, l.url, l.tag, g.d
        FROM change AS g CROSS JOIN LATERAL (VALUES (g.link, g.url, g.tag), (g.link, g.url, '*'), (-1, '', g.tag),
                                                    (-1, '', '*')) AS l (link, url, tag)
    ), recipients AS (
        SELECT v.campaign_id, v.subscriber_id, v.link, max(v.url) AS url, v.tag, sum(v.d) AS d,
               (SELECT count(*) FROM einmal.clicks AS k
                WHERE k.campaign_id = v.campaign_id AND k.subscriber_id = v.subscriber_id
                  AND (v.link = -1 OR k.link = v.link) AND (v.tag = '*' OR k.tag = v.tag)) AS now
        FROM levels AS v
        GROUP BY v.campaign_id, v.subscriber_id, v.link, v.tag
    )
    INSERT INTO einmal.click_counts AS n (campaign_id, link, url, tag, total, recipients)
    SELECT r.campaign_id, r.link, max(r.url), r.tag, sum(r.d), sum((r.now > 0)::integer - (r.now - r.d > 0)::integer)
    FROM recipients AS r
    GROUP BY r.campaign_id, r.link, r.tag
    HAVING sum(r.d) <> 0 OR sum((r.now > 0)::integer - (r.now - r.d > 0)::integer) <> 0
    ORDER BY r.campaign_id, r.link, r.tag
    ON CONFLICT (campaign_id, link, tag) DO UPDATE
        SET total = n.total + EXCLUDED.total, recipients = n.recipients + EXCLUDED.recipients;
END $$;

-- a click written (+1) or deleted (-1): `changed`, the statement's rows
CREATE FUNCTION einmal.click_counts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM einmal.click_counts_move(a.campaigns, a.subscribers, a.links, a.urls, a.tags,
                                     array_fill(CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END, ARRAY[a.n]))
    FROM (SELECT array_agg(campaign_id) AS campaigns, array_agg(subscriber_id) AS subscribers, array_agg(link) AS links,
                 array_agg(url) AS urls, array_agg(tag) AS tags, count(*)::integer AS n FROM changed) AS a
    WHERE a.n > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION einmal.click_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM einmal.click_counts_move(a.campaigns, a.subscribers, a.links, a.urls, a.tags, a.deltas)
    FROM (SELECT array_agg(campaign_id) AS campaigns, array_agg(subscriber_id) AS subscribers, array_agg(link) AS links,
                 array_agg(url) AS urls, array_agg(tag) AS tags, array_agg(d) AS deltas
          FROM (SELECT n.campaign_id, n.subscriber_id, n.link, n.url, n.tag, 1 AS d
                FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id WHERE o.tag <> n.tag
                UNION ALL
                SELECT o.campaign_id, o.subscriber_id, o.link, o.url, o.tag, -1
                FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id WHERE o.tag <> n.tag) AS moved) AS a
    WHERE a.campaigns IS NOT NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER clicks_counts_insert AFTER INSERT ON einmal.clicks
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION einmal.click_counts_changed();
CREATE TRIGGER clicks_counts_update AFTER UPDATE ON einmal.clicks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION einmal.click_counts_updated();
CREATE TRIGGER clicks_counts_delete AFTER DELETE ON einmal.clicks
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION einmal.click_counts_changed();

-- the clicks written before
INSERT INTO einmal.click_counts (campaign_id, link, url, tag, total, recipients)
SELECT k.campaign_id, coalesce(k.link, -1), CASE WHEN GROUPING(k.link) = 0 THEN max(k.url) ELSE '' END,
       coalesce(k.tag, '*'), count(*), count(DISTINCT k.subscriber_id)
FROM einmal.clicks AS k
GROUP BY GROUPING SETS ((k.campaign_id, k.link, k.tag), (k.campaign_id, k.link), (k.campaign_id, k.tag), (k.campaign_id));
