"""Outbound webhooks (docs/design.md#webhooks): an account's endpoints (endpoints.py), the URL policy that
keeps deliveries off private networks (policy.py), Standard Webhooks signing (signing.py), the retry schedule
(schedule.py) and one delivery over HTTP (delivery.py). The events themselves are written by PostgreSQL
triggers (sql/migrations/0112_webhooks.sql); actors/webhooks.py delivers them."""
