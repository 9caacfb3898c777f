"""The README's double opt-in example, run as it is written there: its curl commands against a real node."""

import os
import re
import sys
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import ROOT
from tests.support.optin import SECRET, SETTINGS, confirmation_rows, memberships
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


def readme_example() -> str:
    section = (ROOT / "README.md").read_text().split("### Double opt-in\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```bash\n(.*?)```", section, re.S)
    return block


async def test_the_readme_double_opt_in_example_runs_as_written(conn: asyncpg.Connection, dsn: str) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # einmal on the PATH
    async with http_server(dsn, SECRET, **SETTINGS) as base:
        env.update(EINMAL_DATABASE_URL=dsn, API_URL=f"{base}/api/v1")
        done = await anyio.run_process(["bash", "-euo", "pipefail", "-c", readme_example()], env=env, cwd=ROOT,
                                       check=False)
    assert done.returncode == 0, done.stderr.decode()
    made, first, again = done.stdout.decode().splitlines()
    assert '"name":"news"' in made
    assert first.startswith('{"status":"pending"') and again == "202"
    list_id = await conn.fetchval("SELECT id FROM einmal.lists")
    assert await memberships(conn, list_id) == {"grace@example.org": "unconfirmed"}
    assert [r["email"] for r in await confirmation_rows(conn)] == ["grace@example.org"]
