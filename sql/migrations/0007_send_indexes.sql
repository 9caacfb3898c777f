-- Less work for each update of a send row. Each message costs three (claimed, sending, sent); each
-- changes `status`, so none can be HOT and every index of einmal.sends gets a new entry each time.
-- sends_campaign_status (campaign_id, status) took one on every update: the counts by campaign it
-- served read sends_one_per_subscriber (campaign_id, …) instead, "is anything of this campaign still
-- open" reads sends_claimable and sends_held, and the in-doubt rows get a partial index written only
-- when a row goes in doubt. sends_job_id duplicated sends_one_per_subscriber: the CHECK
-- sends_job_id_derived makes job_id a function of (campaign_id, subscriber_id), so it stays unique.
DROP INDEX einmal.sends_campaign_status;
ALTER TABLE einmal.sends DROP CONSTRAINT sends_job_id;
CREATE INDEX sends_in_doubt ON einmal.sends (campaign_id) WHERE status = 'in_doubt';
