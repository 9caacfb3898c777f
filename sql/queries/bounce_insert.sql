-- Record inbound event $1 about send row $3 (of campaign $8) of account $2: kind $4 (hard, soft, complaint, unclassified),
-- status $5, reason $6 (service/inbound/reasons.py), and $7 whether it counts toward the soft bounce limit.
INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status, reason, counts, campaign_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
