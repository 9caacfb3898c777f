-- Retention, step 4 of 4: einmal.sends becomes a table partitioned by campaign, so that a finished campaign's
-- rows go as one table (`einmal prune`, docs/design.md#retention). Everything here is catalog work under one short
-- ACCESS EXCLUSIVE lock of today's table, whatever its size: it is renamed einmal.sends_legacy and attached
-- below the bound 0051 set, which its validated CHECK proves, so the attach reads no row; its indexes and
-- foreign keys match the new parent's and are attached, not built. The id keeps counting in a sequence
-- (an identity column needs PostgreSQL 17 on a partitioned table); each partition's primary key (id) and the
-- one sequence keep ids unique. Unique constraints of the parent include campaign_id.
SET LOCAL lock_timeout = '10s';
LOCK TABLE einmal.sends IN ACCESS EXCLUSIVE MODE;

-- a foreign key to a partitioned table would need campaign_id, and would keep a pruned campaign's partition
ALTER TABLE einmal.bounces DROP CONSTRAINT bounces_send_id_fkey;
UPDATE einmal.bounces b SET campaign_id = s.campaign_id FROM einmal.sends s
WHERE b.campaign_id IS NULL AND s.id = b.send_id;

ALTER TABLE einmal.sends RENAME TO sends_legacy;
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = 'einmal.sends_legacy'::regclass AND c.relname LIKE 'sends\_%' LOOP
        EXECUTE format('ALTER INDEX einmal.%I RENAME TO %I', name, 'sends_legacy_' || substr(name, 7));
    END LOOP;
END $$;
ALTER TABLE einmal.sends_legacy ALTER COLUMN id DROP IDENTITY;
CREATE SEQUENCE einmal.send_ids;
SELECT setval('einmal.send_ids', coalesce((SELECT max(id) FROM einmal.sends_legacy), 0) + 1, false);
ALTER TABLE einmal.sends_legacy ALTER COLUMN id SET DEFAULT nextval('einmal.send_ids');

CREATE TABLE einmal.sends (LIKE einmal.sends_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (campaign_id);
ALTER TABLE einmal.sends DROP CONSTRAINT sends_legacy_range;
ALTER SEQUENCE einmal.send_ids OWNED BY einmal.sends.id;
ALTER TABLE einmal.sends
    ADD CONSTRAINT sends_one_per_subscriber UNIQUE (campaign_id, subscriber_id),
    ADD CONSTRAINT sends_one_per_address UNIQUE (campaign_id, email_lower),
    ADD CONSTRAINT sends_campaign_id_fkey FOREIGN KEY (campaign_id) REFERENCES einmal.campaigns (id),
    ADD CONSTRAINT sends_account_id_fkey FOREIGN KEY (account_id) REFERENCES einmal.accounts (id),
    ADD CONSTRAINT sends_subscriber_id_fkey FOREIGN KEY (subscriber_id) REFERENCES einmal.subscribers (id);
CREATE INDEX sends_claimable ON einmal.sends (campaign_id, next_attempt_at, id) WHERE status = 'queued';
CREATE INDEX sends_held ON einmal.sends (claimed_by) WHERE status IN ('claimed', 'sending');
CREATE INDEX sends_in_doubt ON einmal.sends (campaign_id) WHERE status = 'in_doubt';
DO $$
BEGIN
    EXECUTE format('ALTER TABLE einmal.sends ATTACH PARTITION einmal.sends_legacy FOR VALUES FROM (MINVALUE) TO (%s)',
                   (SELECT legacy_below FROM einmal.sends_layout));
END $$;

-- Campaign c's partition, einmal.sends_c<c>, made empty and attached: SHARE UPDATE EXCLUSIVE on the parent,
-- which no claim or update waits for (CREATE TABLE … PARTITION OF would take ACCESS EXCLUSIVE). Idempotent;
-- two sessions making it take turns under an advisory lock. Campaigns below legacy_below live in sends_legacy.
CREATE FUNCTION einmal.sends_partition(c bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    part text := 'sends_c' || c;
BEGIN
    IF c < (SELECT legacy_below FROM einmal.sends_layout) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(1701408365, (c % 2147483647)::integer);
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass('einmal.' || part)) THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE IF NOT EXISTS einmal.%I (LIKE einmal.sends INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                   'INCLUDING STORAGE, PRIMARY KEY (id))', part);
    EXECUTE format('ALTER TABLE einmal.sends ATTACH PARTITION einmal.%I FOR VALUES FROM (%s) TO (%s)', part, c, c + 1);
END
$$;

-- every campaign has its partition from its creation on, whoever inserts it
CREATE FUNCTION einmal.campaign_partition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM einmal.sends_partition(NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER campaigns_partition AFTER INSERT ON einmal.campaigns
    FOR EACH ROW EXECUTE FUNCTION einmal.campaign_partition();
-- campaigns an older node created since 0051
SELECT einmal.sends_partition(id) FROM einmal.campaigns
WHERE id >= (SELECT legacy_below FROM einmal.sends_layout) ORDER BY id;
