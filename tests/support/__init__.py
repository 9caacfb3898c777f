"""What the tests share: servers (SMTP, HTTP, a PostgreSQL cluster), node processes, reports."""
