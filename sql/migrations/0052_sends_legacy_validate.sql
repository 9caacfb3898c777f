-- Retention, step 3 of 4: one scan of einmal.sends proves the bound for the rows already there, under a
-- SHARE UPDATE EXCLUSIVE lock: nodes keep claiming and recording while it runs (1,000,000 rows: docs/design.md#retention).
ALTER TABLE einmal.sends VALIDATE CONSTRAINT sends_legacy_range;
