-- claim up to :batch_size due rows of campaign :campaign_id for claim token :token, within the budget all
-- nodes share: :rate messages a second, :quota_hour in any :hour_seconds seconds, :quota_day in any
-- :day_seconds seconds (0: no limit); :domain_rates[i] messages a second to domain :domains[i]; :probes probe
-- rows to a domain whose pause is over, paused :pause_seconds seconds doubling up to :pause_max_seconds;
-- within the rate and quotas of each relay named in :relays that has any (einmal.relays).
-- Rows whose address is suppressed are settled as 'suppressed' instead. Each claimed row comes with its
-- send slot (sql/migrations/0010_send_budget.sql, docs/design.md#sending-budget). Each argument is passed by the
-- function's own name for it, so that the server, too, checks which is which.
SELECT * FROM einmal.send_claim(
    p_campaign => :campaign_id, p_token => :token, p_batch => :batch_size, p_rate => :rate,
    p_quota_hour => :quota_hour, p_quota_day => :quota_day, p_hour_seconds => :hour_seconds,
    p_day_seconds => :day_seconds, p_domains => :domains, p_domain_rates => :domain_rates, p_probes => :probes,
    p_pause => :pause_seconds, p_pause_max => :pause_max_seconds, p_relays => :relays,
    p_account_rate => :account_rate, p_account_quota_hour => :account_quota_hour,
    p_account_quota_day => :account_quota_day, p_reach => :reach)
