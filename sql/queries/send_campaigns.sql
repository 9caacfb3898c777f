-- The campaign of each send row of ids :ids, for an outcome made without its batch: a probe of every partition
-- (rare; send_advance then reads one partition per row)
SELECT id, campaign_id FROM einmal.sends WHERE id = ANY (:ids::bigint[])
