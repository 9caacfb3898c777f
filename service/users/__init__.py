"""Who may enter the operator's console (docs/guide/console.md): its users (users.py), their passwords
(passwords.py), their sessions (sessions.py) and the bound on guessing passwords (throttle.py)."""
