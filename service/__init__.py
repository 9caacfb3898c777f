"""einmal: email campaigns from PostgreSQL, each recipient exactly once."""
