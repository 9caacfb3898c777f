"""einmal behind a real PgBouncer in its default configuration, in session and in transaction mode:
`einmal migrate` of an empty database, two `einmal run` nodes and `einmal suppress` all go through it,
and a 2,000-recipient campaign with an opt-out mid-send goes out once to each recipient."""

import asyncio
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import anyio
import asyncpg
import pytest

from service import db
from tests.conftest import ROOT, _admin, with_database
from tests.support.pgbouncer import pgbouncer
from tests.support.pipeline import (
    Received,
    approve,
    counts,
    message_id,
    node_env,
    recording_server,
    seed,
    start_node,
    stop_node,
)

pytestmark = pytest.mark.anyio

RECIPIENTS = 2000
COMMAND_SECONDS = 30
POOL_SIZE = 20  # PgBouncer's default_pool_size


@pytest.fixture
def empty_dsn(server_url: str):
    """A database of this test's own with nothing in it: `einmal migrate` makes its schema."""
    name = f"einmal_t_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(server_url, f"CREATE DATABASE {name}"))
    yield with_database(server_url, name)
    asyncio.run(_admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def _einmal(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    with anyio.fail_after(COMMAND_SECONDS):  # cancelled, the process is killed
        return await anyio.run_process([sys.executable, "-m", "service", *args], env=env, cwd=ROOT, check=False)


async def _server_sessions_settings(pooled: str) -> set[tuple[str, str]]:
    """plan_cache_mode and search_path of every server session PgBouncer pools (at most its default_pool_size,
    20): as many transactions open at once each hold one of their own."""
    clients = [await asyncpg.connect(pooled, statement_cache_size=0) for _ in range(POOL_SIZE)]
    try:
        for client in clients:
            await client.execute("BEGIN")
        found = {
            tuple(await client.fetchrow("SELECT current_setting('plan_cache_mode'), current_setting('search_path')"))
            for client in clients
        }
        for client in clients:
            await client.execute("ROLLBACK")
        return found
    finally:
        for client in clients:
            await client.close()


async def test_a_node_behind_a_transaction_pooler_without_a_listen_url_refuses_to_start_in_one_line(dsn: str) -> None:
    done = await _einmal(node_env(dsn, 1, EINMAL_DATABASE_POOLER="transaction"), "run")
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "EINMAL_LISTEN_DATABASE_URL must be set" in lines[0], lines


REFUSED_SECONDS = (
    40  # a Python process's start on a machine loaded as CI loads it, and no wait: unset, the wait has no end
)


@pytest.mark.parametrize("command", [["run"], ["migrate"], ["campaign", "list"]])
async def test_a_command_behind_pgbouncer_without_einmal_database_pooler_stops_at_once_naming_it(
    dsn: str, command: list[str], tmp_path: Path
) -> None:
    # PgBouncer refuses the keepalive startup parameters a direct connection sends: no wait can heal that
    with pgbouncer(dsn, "session", tmp_path / "pgbouncer") as pooled:
        began = time.monotonic()
        with anyio.fail_after(REFUSED_SECONDS):  # before: `einmal run` waited for PostgreSQL without end
            done = await anyio.run_process(
                [sys.executable, "-m", "service", *command], env=node_env(pooled, 1), cwd=ROOT, check=False
            )
        took = time.monotonic() - began
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith("einmal: PostgreSQL at 127.0.0.1:"), lines
    assert "unsupported startup parameter: tcp_keepalives_idle" in lines[0], lines
    assert "EINMAL_DATABASE_POOLER=session or transaction" in lines[0], lines
    print(f"\n{' '.join(command)}: exit {done.returncode} after {took:.1f}s")


@pytest.mark.parametrize("mode", ["session", "transaction"])
async def test_a_campaign_with_an_opt_out_mid_send_goes_out_once_behind_pgbouncer(
    empty_dsn: str, mode: str, tmp_path: Path
) -> None:
    with pgbouncer(empty_dsn, mode, tmp_path / "pgbouncer") as pooled:
        extra = {"EINMAL_DATABASE_POOLER": mode}
        if mode == "transaction":  # LISTEN needs a session of its own: the direct URL
            extra["EINMAL_LISTEN_DATABASE_URL"] = empty_dsn
        # 150 a second: the rest of the campaign outlasts an `einmal suppress` started on a loaded machine
        env = node_env(pooled, 1, EINMAL_RATE_LIMIT="150", EINMAL_BATCH_SIZE="50", **extra)
        done = await _einmal(env, "migrate")
        assert done.returncode == 0, done.stderr.decode()
        conn = await asyncpg.connect(empty_dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM einmal.migrations") == len(db.migrations())
            advisory = (  # this database's: other tests' run beside it
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            assert await conn.fetchval(advisory) == 0
            campaign = await seed(conn, [f"p{i}@example.com" for i in range(RECIPIENTS)])
            received = Received()
            async with recording_server(received) as port:
                env = {**env, "EINMAL_SMTP_PORT": str(port)}
                nodes = [start_node({**env, "EINMAL_NODE_ID": f"n{i}"}, tmp_path / f"n{i}.log") for i in (1, 2)]
                try:
                    await approve(conn, campaign)
                    with anyio.fail_after(60):
                        while len(received.messages) < 300:
                            assert all(n.poll() is None for n in nodes), "a node exited"
                            await anyio.sleep(0.05)
                    # an address whose row is still queued, held back as a retry's backoff would hold it until its
                    # opt-out has committed (a loaded machine starts `einmal suppress` slower than 1,700 messages go)
                    opted_out = await conn.fetchrow(
                        """
                        UPDATE einmal.sends d SET next_attempt_at = now() + interval '1 hour' FROM einmal.subscribers s
                        WHERE d.id = (SELECT id FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued'
                                      ORDER BY id DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
                          AND d.status = 'queued' AND s.id = d.subscriber_id
                        RETURNING d.id AS send_id, s.id, s.email""",
                        campaign,
                    )
                    assert opted_out is not None, "rows were still queued mid-send"
                    done = await _einmal(env, "suppress", "--account", "acme", opted_out["email"])
                    assert done.returncode == 0, done.stderr.decode()
                    released = "UPDATE einmal.sends SET next_attempt_at = now() WHERE id = $1 AND status = 'queued'"
                    assert await conn.execute(released, opted_out["send_id"]) == "UPDATE 1"
                    with anyio.fail_after(90):
                        while (
                            await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) != "sent"
                        ):
                            assert all(n.poll() is None for n in nodes), "a node exited"
                            await anyio.sleep(0.1)
                finally:
                    codes = [await stop_node(n) for n in nodes]
                logs = "\n".join((tmp_path / f"n{i}.log").read_text()[-3000:] for i in (1, 2))
                assert codes == [0, 0], logs
            final = await counts(conn, campaign)
        finally:
            await conn.close()
        if mode == "transaction":
            assert await _server_sessions_settings(pooled) == {("auto", '"$user", public')}, "no SET left behind"
    ids = Counter(received.ids())
    twice = {i: n for i, n in ids.items() if n > 1}
    print(f"\n{mode}: received {len(received.messages)}, twice {len(twice)}, final {final}")
    assert not twice, f"received twice: {list(twice)[:5]}"
    assert ids[message_id(campaign, opted_out["id"])] == 0, "the opt-out won"
    assert final == {"sent": RECIPIENTS - 1, "suppressed": 1}, final
    assert len(ids) == RECIPIENTS - 1
