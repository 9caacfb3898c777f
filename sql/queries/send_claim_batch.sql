-- claim up to $3 due rows of campaign $1 for claim token $2, within the budget all nodes share: $4
-- messages a second, $5 in any $7 seconds, $6 in any $8 seconds (0: no limit); $10[i] messages a second
-- to domain $9[i]; $11 probe rows to a domain whose pause is over, paused $12 seconds doubling up to $13.
-- Rows whose address is suppressed are settled as 'suppressed' instead. Each claimed row comes with its
-- send slot (sql/migrations/0010_send_budget.sql, docs/design.md#sending-budget).
SELECT * FROM einmal.send_claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
