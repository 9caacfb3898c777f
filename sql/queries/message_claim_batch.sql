-- claim up to :batch_size due rows of the messages (einmal.sends_messages, docs/design.md#messages) of account
-- :account_id for claim token :token, within the same budget as a campaign's claim (send_claim_batch.sql: the
-- cluster's rate and quotas, the domains' rates and pauses, the account's relays :relays). Each row comes with
-- its campaign (the message), its data merged over its subscriber's attributes and whether an unsubscribe stops
-- it; a row whose address is suppressed for it is settled 'suppressed'.
SELECT * FROM einmal.send_claim(
    p_campaign => NULL, p_token => :token, p_batch => :batch_size, p_rate => :rate,
    p_quota_hour => :quota_hour, p_quota_day => :quota_day, p_hour_seconds => :hour_seconds,
    p_day_seconds => :day_seconds, p_domains => :domains, p_domain_rates => :domain_rates, p_probes => :probes,
    p_pause => :pause_seconds, p_pause_max => :pause_max_seconds, p_relays => :relays,
    p_account => :account_id::bigint, p_account_rate => :account_rate, p_account_quota_hour => :account_quota_hour,
    p_account_quota_day => :account_quota_day, p_reach => :reach)
