-- A bounce may now be about us rather than its recipient (service/inbound/reasons.py): reason 'sender', a
-- refusal of our return path or one at MAIL FROM, which changes nothing for the address. The check is
-- replaced NOT VALID: the rows already there satisfy it, and no scan of einmal.bounces is needed.
ALTER TABLE einmal.bounces DROP CONSTRAINT bounces_reason_check;
ALTER TABLE einmal.bounces
    ADD CONSTRAINT bounces_reason_check CHECK (reason IN ('no_mailbox', 'no_domain', 'disabled', 'mailbox_full',
        'sender', 'policy', 'authentication', 'content', 'routing', 'expired', 'unclassified', 'complaint'))
        NOT VALID;
