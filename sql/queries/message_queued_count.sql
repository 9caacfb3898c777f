-- account :account_id's bound on its messages queued and not yet sent (its own, else :default_max; 0: none), its
-- rate (its own, else :default_rate), and how many it has, counted on sends_messages_unsent up to the bound + 1
SELECT coalesce(a.messages_queued_max, :default_max::integer) AS bound,
       coalesce(a.send_rate, :default_rate::float8) AS rate,
       (SELECT count(*) FROM (SELECT 1 FROM einmal.sends_messages s
                              WHERE s.account_id = a.id AND s.status IN ('queued', 'claimed', 'sending')
                              LIMIT coalesce(a.messages_queued_max, :default_max::integer) + 1) q) AS queued
FROM einmal.accounts a WHERE a.id = :account_id
