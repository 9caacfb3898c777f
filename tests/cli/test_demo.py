"""`einmal demo` seeds only the database it was told to: its embedded one, or --database-url; with
--keep-serving it offers a link the person can still press, and a signal ends it with its embedded server."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import asyncpg
import psutil
import pytest

from service.users import users
from tests.conftest import ROOT, UNSUBSCRIBE, einmal

NO_UNSUBSCRIBE = dict.fromkeys(UNSUBSCRIBE)  # as a new operator runs it: the demo sets its own

pytestmark = pytest.mark.anyio


async def test_demo_refuses_a_database_named_only_by_the_environment(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    for variable in ("EINMAL_DATABASE_URL", "DATABASE_URL"):
        result = einmal(
            "demo", "--subscribers", "20", "--out", str(tmp_path / "out"), env={variable: dsn, **NO_UNSUBSCRIBE}
        )
        assert result.returncode != 0 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "the demo writes sample data into it: pass --database-url" in result.stderr
    assert await conn.fetchval("SELECT count(*) FROM einmal.accounts") == 0
    assert not (tmp_path / "out").exists()


async def test_demo_with_database_url_says_which_database_and_sends_there(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    result = einmal(
        "demo",
        "--subscribers",
        "20",
        "--out",
        str(tmp_path / "out"),
        "--database-url",
        dsn,
        env=NO_UNSUBSCRIBE,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    database = dsn.rsplit("/", 1)[1]
    assert result.stdout.splitlines()[0].startswith("einmal demo: database ") and database in result.stdout
    assert await conn.fetchval("SELECT count(*) FROM einmal.sends WHERE status = 'sent'") > 0
    # the counts add up: 20 subscribers in 23 rows (2 again on a second list, 1 in upper case), then the import
    # counts the rows of the file: 20 new subscribers, 3 rows naming one already there
    lines = result.stdout.splitlines()
    assert lines[1].startswith(
        "einmal demo: 20 sample subscribers in 23 rows of CSV (2 again for a second list, "
        "1 again in upper case), messages captured in "
    )
    assert lines[2] == "imported 20, already present 3, rejected 0"
    # the console's address and its operator's password, which signs in
    console = next(line for line in lines if line.startswith("einmal demo: the console is http://127.0.0.1:"))
    assert console.split("/console/ : sign in as demo, password ")[1].endswith(" (this run's)")
    password = console.split(", password ")[1].removesuffix(" (this run's)")
    assert await users.sign_in(conn, name="demo", password=password) is not None
    # its own node is starting: it never says that none runs
    assert "no node is running" not in result.stdout + result.stderr


def _postgres_of(pgdata: Path) -> list[psutil.Process]:
    """The running postgres processes of this data directory."""
    return [
        p
        for p in psutil.process_iter(attrs=("name", "cmdline", "status"))
        if p.info["name"] == "postgres"
        and p.info["status"] != psutil.STATUS_ZOMBIE
        and str(pgdata) in (p.info["cmdline"] or [])
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_keep_serving_offers_a_link_still_to_press_and_a_signal_stops_its_embedded_postgres(
    tmp_path: Path, signum: int
) -> None:
    # not under tmp_path: the embedded server's user must traverse the folder (see tests/core/test_embedded.py)
    folder = Path(tempfile.mkdtemp(prefix="einmal-embedded-"))
    pgdata = (folder / "pgdata").resolve()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service",
            "demo",
            "--subscribers",
            "20",
            "--keep-serving",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "EINMAL_EMBEDDED_DIR": str(folder), "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 180
        while not (lines and lines[-1].startswith("serving ")) and time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, "".join(lines) + demo.stderr.read()
            lines.append(line)
        out = "".join(lines)
        assert "one-click POST: HTTP 200" in out, out
        pressed = re.search(r"unsubscribe link of .*\n  (\S+)\n  one-click POST", out)[1]
        offered = [url for url in re.findall(r"^  (http://\S+/unsubscribe\?token=\S+)$", out, re.M) if url != pressed]
        assert offered, f"the only link printed is the one the demo pressed:\n{out}"
        with urllib.request.urlopen(offered[-1], timeout=30) as page:  # a GET asks; it does not unsubscribe
            html = page.read().decode()
        assert "<button" in html and "already unsubscribed" not in html, html
        assert _postgres_of(pgdata), "the demo's embedded PostgreSQL is not running"

        demo.send_signal(signum)
        rest, errors = demo.communicate(timeout=60)
        assert demo.returncode == 0, (demo.returncode, rest, errors)
        assert "Traceback" not in errors, errors
        assert "campaign 1 sent" in rest, rest
        assert _postgres_of(pgdata) == [], "the embedded PostgreSQL still runs after the demo ended"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for proc in _postgres_of(pgdata):
            proc.terminate()
            psutil.wait_procs([proc], timeout=5)
        shutil.rmtree(folder, ignore_errors=True)


async def test_demo_links_are_its_own_whatever_einmal_unsubscribe_url_says(dsn: str, tmp_path: Path) -> None:
    """An operator's EINMAL_UNSUBSCRIBE_URL names their nodes, not the demo: its messages link to its own surface,
    which it follows (before: it followed the configured one, nothing answered, and it ended in a traceback)."""
    elsewhere = {
        "EINMAL_UNSUBSCRIBE_URL": "http://127.0.0.1:9/unsubscribe",
        "EINMAL_UNSUBSCRIBE_SECRET": "an-operators-key-of-32-characters-or-more",
    }
    result = einmal(
        "demo", "--subscribers", "20", "--out", str(tmp_path / "out"), "--database-url", dsn, env=elsewhere, timeout=240
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert ":9/unsubscribe" not in result.stdout
    assert re.search(r"one-click POST: HTTP 200; \S+ suppressed: yes", result.stdout), result.stdout
