-- The sending budget of the account named :account (sql/migrations/0121_account_budget.sql): each setting whose
-- :*_given is true set to its value (NULL: the installation's default). No row when there is no such account.
UPDATE einmal.accounts
SET send_rate = CASE WHEN :rate_given::boolean THEN :rate::float8 ELSE send_rate END,
    send_quota_hour = CASE WHEN :quota_hour_given::boolean THEN :quota_hour::integer ELSE send_quota_hour END,
    send_quota_day = CASE WHEN :quota_day_given::boolean THEN :quota_day::integer ELSE send_quota_day END,
    messages_queued_max = CASE WHEN :messages_queued_given::boolean THEN :messages_queued::integer
                               ELSE messages_queued_max END
WHERE name = :account
RETURNING send_rate AS rate, send_quota_hour AS quota_hour, send_quota_day AS quota_day,
          messages_queued_max AS messages_queued
