"""The README's HTTP API example, run as it is written there: its curl commands against a real node."""

import os
import re
import sys
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.conftest import ROOT
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


def readme_example() -> str:
    section = (ROOT / "README.md").read_text().split("## HTTP API\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return block


async def test_the_readme_example_runs_as_written(conn: asyncpg.Connection, dsn: str, smtp_server) -> None:
    await conn.execute("INSERT INTO einmal.accounts (name) VALUES ('acme')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # einmal on the PATH
    async with http_server(dsn, smtp_host=smtp_server.host, smtp_port=smtp_server.port) as base:
        env.update(EINMAL_DATABASE_URL=dsn, API_URL=f"{base}/api/v1")
        done = await anyio.run_process(["bash", "-euo", "pipefail", "-c", readme_example()], env=env, cwd=ROOT,
                                       check=False)
    assert done.returncode == 0, done.stderr.decode()
    put, listing, deleted, member, changed, preview, test, key = done.stdout.decode().splitlines()
    assert '"email":"ada@example.org"' in put and '"attributes":{"plan":"pro"}' in put
    assert '"subscribers":[{' in listing and '"next":null' in listing
    assert deleted == "204"
    assert '"added":true' in member
    assert '"subject":"Spring is here, {{ name }}"' in changed and '"status":"draft"' in changed
    assert '"subject":"Spring is here, Bob"' in preview and '"text":"Hi Bob' in preview
    assert '"to":"qa@example.org"' in test and '"reply":"250' in test
    [received] = smtp_server.wait_for(1)
    assert received.rcpt_tos == ("qa@example.org",) and b"Subject: [TEST] Spring is here, Bob" in received.data
    assert '"name":"reports","scope":"read"' in key and '"key":"einmal_' in key
    assert await conn.fetchval("SELECT reason FROM einmal.suppressions") == "erased"

