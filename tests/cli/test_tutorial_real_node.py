"""The tutorial's way from the demo to a real node (docs/guide/tutorial.md), run as it is written: the minimum
variables, the test SMTP server it names, migrate, import, a campaign, `einmal run`, status until sent, SIGTERM.
Only what names this machine changes: the database URL, and free ports for the SMTP server and the HTTP surface."""

import email
import os
import re
import socket
import subprocess
import sys
from email import policy
from pathlib import Path

import anyio
import pytest

from tests.conftest import einmal
from tests.support import doc_examples
from tests.support.pgcluster import BIN, PgCluster

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_tutorial_way_from_the_demo_to_a_real_node_runs_as_written(dsn: str, tmp_path: Path) -> None:
    block = doc_examples.example("guide/tutorial.md", "bash", "## From the demo to a real node")
    smtp, http = free_port(), free_port()
    block = re.sub(r"(?m)^export EINMAL_DATABASE_URL=\S+", f"export EINMAL_DATABASE_URL={dsn}", block)
    assert block.count("2525") == 2 and block.count("8080") == 3, block
    block = block.replace("2525", str(smtp)).replace("8080", str(http))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # as `. .venv/bin/activate`
    with anyio.fail_after(240):
        done = await anyio.run_process(["bash", "-euo", "pipefail", "-c", block], env=env, cwd=tmp_path, check=False)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, (out, err)
    assert "Traceback" not in err, err
    assert "no node is running" not in out + err, "the tutorial starts its node: never told none runs"
    assert re.search(r"(?m)^\s*\d+\s+acme\s+news\s+2\b", out), out  # einmal lists: the list, its 2 members
    assert "done 2/2 (sent 2" in out, out
    messages = [
        email.message_from_bytes(path.read_bytes(), policy=policy.default)
        for path in (tmp_path / "mail" / "new").iterdir()
    ]
    assert sorted(m["To"].addresses[0].addr_spec for m in messages) == ["ann@example.org", "bob@example.org"]
    for message in messages:  # each with its one-click unsubscribe, in the header and the text
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        link = re.fullmatch(r"<(http://127\.0\.0\.1:\d+/unsubscribe\?token=\S+)>", message["List-Unsubscribe"])
        assert link is not None and link[1] in message.get_body(("plain",)).get_content()


def test_the_role_and_database_the_tutorial_makes_are_all_einmal_needs() -> None:
    """On a fresh server, the tutorial's two commands as its superuser, then its EINMAL_DATABASE_URL: migrate runs
    as the role `einmal`, owner of the database `einmal` and nothing more."""
    text = " ".join((doc_examples.ROOT / "docs/guide/tutorial.md").read_text().split())
    made = re.search(r"`sudo -u postgres (createuser einmal) && sudo -u postgres (createdb -O einmal einmal)`", text)
    assert made is not None, "the tutorial says how to make the role and database einmal"
    block = doc_examples.example("guide/tutorial.md", "bash", "## From the demo to a real node")
    url = re.search(r"(?m)^export EINMAL_DATABASE_URL=(\S+)$", block)
    assert url is not None and url[1] == "postgresql://einmal@127.0.0.1:5432/einmal", block
    cluster = PgCluster.create()
    try:
        cluster.start()
        superuser = {**os.environ, "PGHOST": "127.0.0.1", "PGPORT": str(cluster.port), "PGUSER": "postgres"}
        for command in made.groups():  # as the server's superuser, which sudo -u postgres is on a packaged server
            program, *args = command.split()
            subprocess.run([str(BIN / program), *args], env=superuser, check=True, capture_output=True, timeout=60)
        database_url = url[1].replace(":5432/", f":{cluster.port}/")
        done = einmal("migrate", env={"EINMAL_DATABASE_URL": database_url}, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
        again = einmal("migrate", env={"EINMAL_DATABASE_URL": database_url}, timeout=120)
        assert again.returncode == 0, again.stderr
    finally:
        cluster.destroy()
