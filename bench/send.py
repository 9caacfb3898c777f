"""einmal end to end: a campaign approved, `einmal run` node processes sending it to
smtp-sink, timed from the approval to the campaign's `sent`."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import asyncpg
import httpx

from bench import database
from bench.cpu import Backends, cpu_seconds
from bench.sink import Sink
from service.campaigns import transitions

ROOT = Path(__file__).resolve().parent.parent
BODY_BYTES = 4096

# set by the bench for each node; any other EINMAL_ variable in the bench's environment is passed to the
# nodes (`EINMAL_SMTP_CONNECTIONS=20 make bench`); none: the nodes run at einmal's defaults
BENCH_SETS = (
    "EINMAL_DATABASE_URL",
    "EINMAL_SMTP_HOST",
    "EINMAL_SMTP_PORT",
    "EINMAL_TICK_SECONDS",
    "EINMAL_NODE_TIMEOUT_SECONDS",
    "EINMAL_LOG_LEVEL",
    "EINMAL_HTTP_ADDRESS",
    "EINMAL_INBOUND_SMTP_ADDRESS",
)
# a bulk campaign goes out only with a one-click unsubscribe (docs/design.md#listening-surface): the nodes sign each
# message's link, as a production node does, unless the bench's environment names its own
UNSUBSCRIBE = {
    "EINMAL_UNSUBSCRIBE_URL": "https://bench.einmal.invalid/unsubscribe",
    "EINMAL_UNSUBSCRIBE_SECRET": "bench-unsubscribe-key-of-32-characters-at-least",
}


def passed_settings() -> dict[str, str]:
    """The EINMAL_ variables of the bench's environment that the nodes get as they are."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("EINMAL_") and k not in BENCH_SETS}


def body() -> str:
    """A text body of about 4 KB with a merge field, in lines of 70-odd characters."""
    line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod {n:03d}.\n"
    text = "Hello {{ name }},\n\n"
    n = 0
    while len(text) + len(line) < BODY_BYTES - 40:
        text += line.format(n=n)
        n += 1
    return text + "\nRegards,\nThe bench\n"


@dataclass
class Run:
    nodes: int
    messages: int
    seconds: float = 0.0  # approval -> the campaign's sent_at
    first_seconds: float | None = None  # approval -> the first message at smtp-sink
    last_seconds: float | None = None  # approval -> the last message at smtp-sink
    statements: int = 0
    statement_method: str = ""
    top_statements: list[tuple[int, str]] = field(default_factory=list)  # (calls, query), pg_stat_statements
    pg_cpu: float | None = None  # CPU seconds of PostgreSQL's backends serving the nodes (bench/cpu.py)
    node_cpu: float = 0.0  # CPU seconds of the node processes, approval -> sent
    rss: list[int] = field(default_factory=list)  # peak RSS (VmHWM) per node, bytes
    rss_samples: list[tuple[int, int]] = field(default_factory=list)  # (messages at sink, RSS) of node 0
    delivered: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    sent: bool = True  # False: stopped at the time limit before the campaign was sent

    @property
    def rate(self) -> float:
        """Messages per second from the approval to `sent` (an upper bound when not sent)."""
        return self.messages / self.seconds if self.seconds else 0.0


def node_env(dsn: str, port: int, tick: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EINMAL_", "OTEL_")) and k != "DATABASE_URL"}
    env.update(UNSUBSCRIBE)
    env.update(
        passed_settings(),
        EINMAL_DATABASE_URL=dsn,
        EINMAL_SMTP_HOST="127.0.0.1",
        EINMAL_SMTP_PORT=str(port),
        EINMAL_TICK_SECONDS=str(tick),
        EINMAL_NODE_TIMEOUT_SECONDS=str(max(3 * tick, 30)),
        EINMAL_LOG_LEVEL="WARNING",
    )
    return env


def start_node(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "service", "run"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr
        )


def memory(pid: int, key: str) -> int:
    """VmHWM (peak) or VmRSS of a process, in bytes; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


class Monitor:
    """The bench's own connection to the bench database; counts its own transactions."""

    def __init__(self, conn: asyncpg.Connection, counter: database.Statements) -> None:
        self.conn, self.counter, self.prepared = conn, counter, set()

    async def fetchval(self, query: str, *args):
        query = f"{database.Statements.OWN} {query}"
        self.counter.own += 1 + (query not in self.prepared)  # asyncpg prepares once: one more
        self.prepared.add(query)
        return await self.conn.fetchval(query, *args)


async def _stop(proc: subprocess.Popen, timeout: float = 30) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    with anyio.move_on_after(timeout):
        while proc.poll() is None:
            await anyio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    return proc.returncode


async def campaign(
    server: str,
    sink: Sink,
    *,
    nodes: int,
    messages: int,
    tick: float = 60,
    timeout: float = 300,
    sample_rss: bool = False,
    say=print,
    extra_env: dict[str, str] | None = None,
    label: str = "",
) -> Run:
    name = f"einmal_bench_{os.getpid()}_{nodes}n{label}"
    dsn = await database.fresh(server, name)
    logs = Path(tempfile.mkdtemp(prefix="einmal-bench-"))
    procs: list[subprocess.Popen] = []
    run = Run(nodes, messages)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            campaign_id = await conn.fetchval(database.sql("seed_campaign"), messages, body())
            await conn.execute("VACUUM ANALYZE")
        finally:
            await conn.close()
        counter = database.Statements(server, name)
        await counter.start()
        run.statement_method = counter.method
        env = node_env(dsn, sink.port, tick) | (extra_env or {})
        procs.extend(start_node(env, logs / f"node{i}.log") for i in range(nodes))
        monitor = Monitor(await asyncpg.connect(dsn), counter)
        backends = Backends(server, name)
        try:
            with anyio.fail_after(60):  # each node heartbeats once its listener runs
                while await monitor.fetchval("SELECT count(*) FROM einmal.nodes") < nodes:
                    if any(p.poll() is not None for p in procs):
                        raise RuntimeError(f"a node exited at start; see {logs}")
                    await anyio.sleep(0.05)
            await backends.start(exclude={await monitor.fetchval("SELECT pg_backend_pid()")})
            node_cpu = [cpu_seconds(p.pid) or 0.0 for p in procs]
            base = sink.arm()
            approved_wall, approved = time.time(), time.monotonic()
            await transitions.transition(monitor.conn, verb="approve", campaign_id=campaign_id)
            deadline = approved + timeout
            while True:
                sent_at = await monitor.fetchval(
                    "SELECT sent_at FROM einmal.campaigns WHERE id = $1 AND status = 'sent'", campaign_id
                )
                await backends.sample()
                if sent_at is not None:
                    run.seconds = sent_at.timestamp() - approved_wall
                    break
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError(f"a node exited while sending; see {logs}")
                if time.monotonic() > deadline:  # a lower bound of the time, and a MISS
                    run.seconds, run.sent = time.monotonic() - approved, False
                    say(f"  campaign not sent within {timeout:.0f} s; node logs in {logs}")
                    break
                if sample_rss:
                    run.rss_samples.append((sink.messages - base, memory(procs[0].pid, "VmRSS")))
                await anyio.sleep(0.25 if sample_rss else 0.1)
            run.pg_cpu = await backends.stop()
            run.node_cpu = sum((cpu_seconds(p.pid) or 0.0) - b for p, b in zip(procs, node_cpu, strict=True))
            run.first_seconds = sink.first_at - approved if sink.first_at is not None else None
            run.rss = [memory(p.pid, "VmHWM") for p in procs]
            sink.wait_messages(base + messages, timeout=5)
            run.delivered = sink.messages - base
            run.last_seconds = sink.last_at - approved if run.delivered == messages else None
        finally:
            await monitor.conn.close()
            await backends.close()
        codes = [await _stop(proc) for proc in procs]
        if any(codes):
            say(f"warning: node exit codes {codes}; see {logs}")
        run.statements = await counter.stop()
        run.top_statements = counter.top
        conn = await asyncpg.connect(dsn)
        try:
            run.counts = {
                r["status"]: r["count"]
                for r in await conn.fetch(
                    "SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign_id
                )
            }
        finally:
            await conn.close()
        if run.sent and not any(codes):
            shutil.rmtree(logs, ignore_errors=True)  # kept when something went wrong
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        await database.drop(server, name)
    return run


async def node_ready(proc: subprocess.Popen, client: httpx.AsyncClient, base: str, logs: Path) -> None:
    """Until the node's /readyz answers 200 (60 s at most); RuntimeError if the node exited first."""
    with anyio.fail_after(60):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the node exited at start; see {logs}")
            try:
                if (await client.get(f"{base}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await anyio.sleep(0.1)


async def post_messages(client: httpx.AsyncClient, count: int, tag: str, spacing: float) -> dict[int, float]:
    """POST /messages `count` times, `spacing` seconds apart: {message id: time.time() just before its POST}."""
    began: dict[int, float] = {}
    for i in range(count):
        at = time.time()
        answer = await client.post(
            "/messages",
            json={"to": f"{tag}{i}@example.org", "subject": "Reset", "text": "Your link.", "from": "shop@example.com"},
        )
        answer.raise_for_status()
        began[answer.json()["id"]] = at
        await anyio.sleep(spacing)
    return began


async def sent_rows(conn: asyncpg.Connection, began: dict[int, float]) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT campaign_id, sent_at FROM einmal.sends WHERE campaign_id = ANY ($1::bigint[])", list(began)
    )


async def latencies(conn: asyncpg.Connection, began: dict[int, float], seconds: float = 120) -> list[float]:
    """Once every message of `began` (post_messages) is recorded sent: each one's seconds from its POST to its
    row's sent_at."""
    with anyio.fail_after(seconds):
        while True:
            rows = await sent_rows(conn, began)
            if all(r["sent_at"] is not None for r in rows):
                return [r["sent_at"].timestamp() - began[r["campaign_id"]] for r in rows]
            await anyio.sleep(0.1)
