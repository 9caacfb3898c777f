"""`einmal console user add|list|remove|password` through the real command line: a password from stdin or
generated and printed once (never an argument), bad input one line and a non-zero exit with nothing
written, each change a line of the audit log, and a generated password that signs in."""

import asyncpg
import pytest

from service.users import users
from tests.conftest import cells, einmal

pytestmark = pytest.mark.anyio


async def test_users_are_added_listed_changed_and_removed(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    added = einmal(
        "console", "user", "add", "ann@acme.example", "--account", "acme", input="a long password\n", dsn=dsn
    )
    assert (added.returncode, added.stdout) == (0, "added console user ann@acme.example (member of account acme)\n")
    made = einmal("console", "user", "add", "root", "--operator", "--generate", dsn=dsn)
    assert made.returncode == 0 and "added console user root (operator)" in made.stderr
    generated = made.stdout.strip()
    assert len(generated) == 20 and await users.sign_in(conn, name="ROOT", password=generated) is not None
    for args, stdin, said in (
        (("ann@acme.example", "--operator"), "another password\n", "a console user named 'ann@acme.example' exists"),
        (("bob", "--operator"), "short\n", "a password has 12 to 1024 characters"),
        (("bob", "--account", "nosuch"), "a long password\n", "no account named 'nosuch'"),
        (("bad name", "--operator"), "a long password\n", "invalid user name 'bad name'"),
    ):
        refused = einmal("console", "user", "add", *args, input=stdin, dsn=dsn)
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and said in refused.stderr, refused.stderr
    assert einmal("console", "user", "add", "bob", "--operator", "a long password", dsn=dsn).returncode == 2
    listed = [cells(line) for line in einmal("console", "user", "list", dsn=dsn).stdout.splitlines()]
    assert [row[:3] for row in listed[1:]] == [["ann@acme.example", "member", "acme"], ["root", "operator", "-"]]
    changed = einmal("console", "user", "password", "Ann@acme.example", input="a new long password\n", dsn=dsn)
    assert changed.returncode == 0, changed.stderr
    assert await users.sign_in(conn, name="ann@acme.example", password="a new long password") is not None
    assert await users.sign_in(conn, name="ann@acme.example", password="a long password") is None
    assert einmal("console", "user", "remove", "ann@acme.example", dsn=dsn).returncode == 0
    gone = einmal("console", "user", "remove", "ann@acme.example", dsn=dsn)
    assert (gone.returncode, gone.stderr) == (1, "einmal: no console user named 'ann@acme.example'\n")
    lines = await conn.fetch("SELECT actor, action, subject FROM einmal.audit_log ORDER BY id")
    assert [tuple(r) for r in lines] == [
        ("cli", "user.add", "user ann@acme.example"),
        ("cli", "user.add", "user root"),
        ("cli", "user.password", "user ann@acme.example"),
        ("cli", "user.remove", "user ann@acme.example"),
    ]
    assert await conn.fetchval("SELECT count(*) FROM einmal.console_users") == 1
