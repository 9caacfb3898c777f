-- Before a campaign with a partition of einmal.sends is inserted (campaign_create, sequence_step_create,
-- optin_campaign_ensure), in its transaction: the lock its partition's ATTACH takes on einmal.sends, taken
-- first. The ATTACH then takes SHARE ROW EXCLUSIVE on einmal.campaigns (for the partition's foreign key), which
-- waits for every open insert of a campaign: had another creator inserted its campaign and then waited here for
-- einmal.sends, they would wait for each other (a deadlock). Creators take turns here holding nothing; claims,
-- updates and messages never wait for this lock. ONLY: the partitions themselves are not locked.
LOCK TABLE ONLY einmal.sends IN SHARE UPDATE EXCLUSIVE MODE
