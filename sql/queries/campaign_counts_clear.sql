-- campaign :campaign_id's kept counts go, to be written again (campaign_counts_write.sql)
DELETE FROM einmal.campaign_counts WHERE campaign_id = :campaign_id
