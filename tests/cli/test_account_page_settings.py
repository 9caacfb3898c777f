"""`einmal accounts set` and `campaign create --language`: what the unsubscribe page shows is set from
the command line, and a wrong value is one line, exit 1, nothing written."""

import asyncpg
import pytest

from tests.conftest import einmal
from tests.support.web import subscriber

pytestmark = pytest.mark.anyio


async def test_the_account_settings_are_refused_in_one_line_when_wrong(conn: asyncpg.Connection, dsn: str) -> None:
    await subscriber(conn)
    cases = {
        ("accounts", "set", "nosuch", "--language", "de"): "einmal: no account named 'nosuch'\n",
        ("accounts", "set", "acme", "--language", "xx"): "einmal: --language 'xx': no texts for it (de, en)",
        ("accounts", "set", "acme", "--contact", "not an address"): "einmal: --contact 'not an address' is not",
        ("accounts", "set", "acme", "--display-name", "a\nb"): "einmal: --display-name must not contain line breaks",
        ("accounts", "set", "acme"): "einmal: nothing to set",
        (
            "campaign",
            "create",
            "--account",
            "acme",
            "--name",
            "N",
            "--subject",
            "S",
            "--from",
            "a@example.org",
            "--text",
            "Hi",
            "--language",
            "klingon",
        ): "einmal: --language 'klingon': no texts for it",
    }
    for args, expected in cases.items():
        result = einmal(*args, dsn=dsn)
        assert result.returncode == 1 and result.stderr.startswith(expected), (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    row = await conn.fetchrow("SELECT display_name, language, contact FROM einmal.accounts")
    assert tuple(row) == (None, "en", None)
    assert await conn.fetchval("SELECT count(*) FROM einmal.campaigns") == 3
    done = einmal(
        "accounts",
        "set",
        "acme",
        "--display-name",
        " Acme News ",
        "--language",
        "de",
        "--contact",
        "Help@Acme.example",
        dsn=dsn,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "account 'acme': display name 'Acme News', language de, contact Help@acme.example, time zone UTC\n"
    )
    cleared = einmal("accounts", "set", "acme", "--display-name", "", "--contact", "", dsn=dsn)
    assert cleared.stdout == "account 'acme': display name -, language de, contact -, time zone UTC\n"
