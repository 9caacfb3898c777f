"""`einmal demo` seeds only the database it was told to: its embedded one, or --database-url."""

from pathlib import Path

import asyncpg
import pytest

from tests.conftest import UNSUBSCRIBE, einmal

NO_UNSUBSCRIBE = dict.fromkeys(UNSUBSCRIBE)  # as a new operator runs it: the demo sets its own

pytestmark = pytest.mark.anyio


async def test_demo_refuses_a_database_named_only_by_the_environment(dsn: str, conn: asyncpg.Connection,
                                                                       tmp_path: Path) -> None:
    for variable in ("EINMAL_DATABASE_URL", "DATABASE_URL"):
        result = einmal("demo", "--subscribers", "20", "--out", str(tmp_path / "out"),
                        env={variable: dsn, **NO_UNSUBSCRIBE})
        assert result.returncode != 0 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "the demo writes sample data into it: pass --database-url" in result.stderr
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts") == 0
    assert not (tmp_path / "out").exists()


async def test_demo_with_database_url_says_which_database_and_sends_there(dsn: str, conn: asyncpg.Connection,
                                                                          tmp_path: Path) -> None:
    result = einmal("demo", "--subscribers", "20", "--out", str(tmp_path / "out"), "--database-url", dsn,
                    env=NO_UNSUBSCRIBE, timeout=240)
    assert result.returncode == 0, result.stderr
    database = dsn.rsplit("/", 1)[1]
    assert result.stdout.splitlines()[0].startswith("einmal demo: database ") and database in result.stdout
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE status = 'sent'") > 0
    # the counts add up: 20 subscribers in 23 rows (2 again on a second list, 1 in upper case), then the import
    # counts the rows of the file: 20 new subscribers, 3 rows naming one already there
    lines = result.stdout.splitlines()
    assert lines[1].startswith("einmal demo: 20 sample subscribers in 23 rows of CSV (2 again for a second list, "
                               "1 again in upper case), messages captured in ")
    assert lines[2] == "imported 20, already present 3, rejected 0"
