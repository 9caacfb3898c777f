-- Why each bounce came back, and whether it counts toward the soft bounce limit (service/inbound/reasons.py):
-- a bounce is now hard, soft, a complaint or unclassified (a bounce that says neither what failed nor why),
-- and its reason (no_mailbox, policy, …) decides what it did. Safe on a table of many rows: the new columns
-- have no default (no rewrite), the new checks are NOT VALID (no scan: the rows already there satisfy them,
-- new rows are checked). Rows written before have no reason; a soft one among them still counts.
ALTER TABLE einmal.bounces DROP CONSTRAINT bounces_kind_check;
ALTER TABLE einmal.bounces
    ADD CONSTRAINT bounces_kind_check CHECK (kind IN ('hard', 'soft', 'complaint', 'unclassified')) NOT VALID,
    ADD COLUMN reason text,  -- service/inbound/reasons.py REASONS, or complaint; NULL: written before 0030
    ADD COLUMN counts boolean,  -- it counts toward EINMAL_SOFT_BOUNCE_LIMIT; NULL: written before (kind = 'soft')
    ADD CONSTRAINT bounces_reason_check CHECK (reason IN ('no_mailbox', 'no_domain', 'disabled', 'mailbox_full',
        'policy', 'authentication', 'content', 'routing', 'expired', 'unclassified', 'complaint')) NOT VALID;
-- The soft bounces of a mailbox are now found through its send rows (bounce_soft_count.sql), as a mailbox
-- full 5.2.2 counts too: the index of soft rows by account is no longer read.
DROP INDEX einmal.bounces_soft;
