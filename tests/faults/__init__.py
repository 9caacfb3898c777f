"""Faults of PostgreSQL, SMTP and node processes, and the chaos run."""
