"""The HTTP surface over real HTTP: unsubscribe, webhooks, a real browser."""
