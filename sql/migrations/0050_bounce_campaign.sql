-- Retention (docs/design.md#retention), step 1 of 4: each bounce names its campaign, so that its history outlives the
-- campaign's send rows (a pruned campaign's partition is dropped; bounces.send_id then names a row gone).
-- The column has no default (no rewrite); the fill locks only bounce rows. Bounces an older node writes
-- before 0053 are filled there.
ALTER TABLE einmal.bounces ADD COLUMN campaign_id bigint;
UPDATE einmal.bounces b SET campaign_id = s.campaign_id FROM einmal.sends s WHERE s.id = b.send_id;
CREATE INDEX bounces_campaign ON einmal.bounces (campaign_id);
-- a bounce written without its campaign (a node of an older version, during an upgrade) takes its row's
CREATE FUNCTION einmal.bounce_campaign() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.campaign_id IS NULL THEN
        NEW.campaign_id := (SELECT s.campaign_id FROM einmal.sends s WHERE s.id = NEW.send_id);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER bounces_campaign BEFORE INSERT ON einmal.bounces
    FOR EACH ROW EXECUTE FUNCTION einmal.bounce_campaign();
