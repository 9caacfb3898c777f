"""Subscribers and suppressions: the CSV import, the address rules it applies, and the addresses never to mail again."""
