"""What comes back: bounce and complaint reports, provider webhooks, and the events they become
(docs/design.md#inbound-events)."""
