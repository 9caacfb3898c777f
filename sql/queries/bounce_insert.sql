-- Record inbound event $1 about send row $3 of account $2: kind $4 (hard, soft, complaint), status $5.
INSERT INTO einmal.bounces (event_id, account_id, send_id, kind, status) VALUES ($1, $2, $3, $4, $5)
