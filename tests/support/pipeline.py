"""Helpers for tests of the sending pipeline: seed data, run nodes, read results."""

import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg

from service.addresses import email_key
from service.smtp.capture import message_ids as _message_ids
from tests.conftest import ROOT, UNSUBSCRIBE
from tests.support import forkserver

# A live node on a loaded two-core machine can miss a few half-second heartbeats; a node is declared
# dead only after this long. Tests of takeover pass TAKEOVER_TIMEOUT, where only the victim can be late.
NODE_TIMEOUT = 15
TAKEOVER_TIMEOUT = 3
# a one-click unsubscribe, without which a node pauses a bulk campaign rather than send it and `campaign create`
# and `approve` refuse one (tests/sending/test_unsubscribe_required.py tests that default)
UNSUBSCRIBE_URL, UNSUBSCRIBE_SECRET = UNSUBSCRIBE["EINMAL_UNSUBSCRIBE_URL"], UNSUBSCRIBE["EINMAL_UNSUBSCRIBE_SECRET"]
NO_UNSUBSCRIBE = dict.fromkeys(UNSUBSCRIBE)  # einmal(env=NO_UNSUBSCRIBE): a command line without one


async def seed(
    conn: asyncpg.Connection,
    addresses: list[str],
    *,
    lists: dict[str, list[str]] | None = None,
    suppressed: list[str] = (),
    body: str = "Hello {{ name }}, this is for {{ email }}.",
) -> int:
    """An account with subscribers on list 'default' (or `lists`) and a draft campaign; its id."""
    account = await conn.fetchval("INSERT INTO einmal.accounts (name) VALUES ('acme') RETURNING id")
    lists = lists or {"default": addresses}
    list_ids = []
    for name, members in lists.items():
        list_id = await conn.fetchval(
            "INSERT INTO einmal.lists (account_id, name) VALUES ($1, $2) RETURNING id", account, name
        )
        list_ids.append(list_id)
        await conn.execute(
            """
            INSERT INTO einmal.subscribers (account_id, email, email_lower, name)
            SELECT $1, e, k, 'Name ' || ordinality FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS m (e, k)
            ON CONFLICT DO NOTHING""",
            account,
            members,
            [email_key(e) for e in members],
        )
        await conn.execute(
            """
            INSERT INTO einmal.list_members (list_id, subscriber_id)
            SELECT $1, id FROM einmal.subscribers WHERE account_id = $2 AND email = ANY ($3::text[])""",
            list_id,
            account,
            members,
        )
    for email in suppressed:
        await conn.execute(
            "INSERT INTO einmal.suppressions (account_id, email_lower) VALUES ($1, $2)", account, email_key(email)
        )
    return await conn.fetchval(
        """
        INSERT INTO einmal.campaigns (account_id, name, subject, from_address, body_text, list_ids)
        VALUES ($1, 'test', 'Hi {{ name }}', 'news@example.com', $2, $3) RETURNING id""",
        account,
        body,
        list_ids,
    )


async def approve(conn: asyncpg.Connection, campaign_id: int) -> None:
    await conn.execute("UPDATE einmal.campaigns SET status = 'approved' WHERE id = $1", campaign_id)
    await conn.execute("SELECT pg_notify('einmal_campaign', $1)", str(campaign_id))


async def counts(conn: asyncpg.Connection, campaign_id: int) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT status, count(*) FROM einmal.sends WHERE campaign_id = $1 GROUP BY status", campaign_id
    )
    return {r["status"]: r["count"] for r in rows}


async def wait_status(conn: asyncpg.Connection, campaign_id: int, status: str, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign_id) != status:
            await anyio.sleep(0.1)


def node_env(dsn: str, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EINMAL_", "OTEL_")) and k != "DATABASE_URL"}
    env.update(
        {
            "EINMAL_DATABASE_URL": dsn,
            "EINMAL_SMTP_HOST": "127.0.0.1",
            "EINMAL_SMTP_PORT": str(port),
            "EINMAL_TICK_SECONDS": "0.5",
            "EINMAL_NODE_TIMEOUT_SECONDS": str(NODE_TIMEOUT),
            "EINMAL_RETRY_BASE_SECONDS": "0.1",
            "EINMAL_SMTP_TIMEOUT_SECONDS": "5",
            **UNSUBSCRIBE,
        }
    )
    env.update(extra)
    return env


def start_node(env: dict[str, str], log: Path) -> subprocess.Popen | forkserver.Child:
    """`einmal run`, its log appended to `log`: forked by the test fork server (tests/support/forkserver.py)."""
    with open(log, "ab") as stderr, open(os.devnull, "rb") as stdin, open(os.devnull, "wb") as stdout:
        if forkserver.ENABLED:
            return forkserver.spawn(
                ["run"], env=env, stdin=stdin.fileno(), stdout=stdout.fileno(), stderr=stderr.fileno()
            )
        return subprocess.Popen(
            [sys.executable, "-m", "service", "run"], env=env, cwd=ROOT, stdin=stdin, stdout=stdout, stderr=stderr
        )


async def stop_node(proc: subprocess.Popen, timeout: float = 20) -> int:
    """SIGTERM, then wait without blocking the event loop (the test's SMTP server runs in it)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        raise AssertionError("node did not stop within its grace period")
    return proc.returncode


def message_id(campaign_id: int, subscriber_id: int) -> str:
    """The Message-ID einmal gives a send row (docs/design.md#promises, P4), as the test nodes' domain writes it."""
    return f"<campaign.{campaign_id}.{subscriber_id}@example.com>"


def message_ids(folder: Path) -> list[str]:
    return _message_ids(folder)


class Received:
    """What a recording SMTP server saw: (monotonic time, recipient, Message-ID) per accepted message."""

    def __init__(self, decide=None, delay: float = 0.0) -> None:
        self.messages: list[tuple[float, str, str]] = []
        self.decide = decide  # recipient -> reply string to refuse with, or None to accept
        self.delay = delay

    async def handle_DATA(self, server, session, envelope) -> str:
        if self.delay:
            await anyio.sleep(self.delay)
        rcpt = envelope.rcpt_tos[0]
        if self.decide and (reply := self.decide(rcpt)):
            return reply
        from email.parser import BytesHeaderParser

        message_id = BytesHeaderParser().parsebytes(envelope.original_content or b"").get("Message-ID", "")
        self.messages.append((time.monotonic(), rcpt, message_id.strip()))
        return "250 2.0.0 Ok: queued"

    def ids(self) -> list[str]:
        return [m[2] for m in self.messages]


class recording_server:
    """`async with recording_server(received) as port:` an aiosmtpd server in this event loop."""

    def __init__(self, received: Received) -> None:
        self.received = received

    async def __aenter__(self) -> int:
        import asyncio

        from aiosmtpd.smtp import SMTP

        loop = asyncio.get_running_loop()
        self.sessions: list = []

        def factory():
            protocol = SMTP(self.received, hostname="test-sink", loop=loop)
            self.sessions.append(protocol)
            return protocol

        self.server = await loop.create_server(factory, host="127.0.0.1", port=0)
        return self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for protocol in self.sessions:
            if protocol.transport is not None:
                protocol.transport.close()
        await self.server.wait_closed()


@asynccontextmanager
async def running_node(settings):
    """`async with running_node(settings):` a node in this event loop, drained on exit."""
    from actors import node

    stop = anyio.Event()
    codes: list[int] = []

    async def serve() -> None:
        codes.append(await node.serve(settings, stop))

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            yield
        finally:
            stop.set()
    assert codes == [0]


def node_settings(dsn: str, port: int, **overrides):
    from service.settings import Settings

    values = dict(
        database_url=dsn,
        smtp_host="127.0.0.1",
        smtp_port=port,
        tick_seconds=0.5,
        node_timeout_seconds=NODE_TIMEOUT,
        retry_base_seconds=0.1,
        smtp_timeout_seconds=5,
        unsubscribe_url=UNSUBSCRIBE_URL,
        unsubscribe_secret=UNSUBSCRIBE_SECRET,
    )
    values.update(overrides)
    return Settings(**values)
