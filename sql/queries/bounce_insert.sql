-- Record inbound event :event_id about send row :send_id (of campaign :campaign_id) of account :account_id: kind
-- :kind (hard, soft, complaint, unclassified), status :status, reason :reason (service/inbound/reasons.py), and
-- :counts whether it counts toward the soft bounce limit.
INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason, counts, campaign_id)
VALUES (:event_id, :account_id, :send_id, :kind, :status, :reason, :counts, :campaign_id)
