"""Fixtures: a real PostgreSQL (the configured one, else the embedded one),
one fresh database per test cloned from a migrated template."""

import asyncio
import fcntl
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from service import db
from service.db import embedded
from service.db.migrate import migrate
from tests.support import forkserver
from tests.support.smtp_servers import make_smtp_server, smtp_certificate, smtp_server  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test`: --dist loadgroup) the tests of a module with a module-scoped fixture
    run on one worker, which makes that fixture once; the others go to whichever worker is free. The tests
    marked `slow` (a minute each) go first, so that none of them starts when the others are nearly done."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info and any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@contextmanager
def _turn(folder: Path, alone: bool) -> Iterator[None]:
    """Every test of a worker holds the tests' lock shared while it runs; a test marked `serial` holds it
    alone, so no test of another worker runs beside it. The gate lets it in before the tests started after
    it asked."""
    with open(folder / "einmal-gate.lock", "a") as gate, open(folder / "einmal-tests.lock", "a") as tests:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(tests, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Under pytest-xdist, a test marked `serial` (it measures time or load) runs with no other beside it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return (yield)
    # each worker's basetemp is a folder of the session's own (xdist's popen-gw<n>)
    with _turn(Path(item.config.option.basetemp).parent, alone=item.get_closest_marker("serial") is not None):
        return (yield)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def server_url() -> str:
    return os.environ.get("EINMAL_DATABASE_URL") or os.environ.get("DATABASE_URL") or embedded.url()


async def _admin(server_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(with_database(server_url, "postgres"))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


class Clones:
    """The tests' databases, each a copy of the migrated template, made and dropped on a thread of their own.

    CREATE DATABASE … TEMPLATE copies the template in a tenth of a second; DROP DATABASE waits for a
    checkpoint (PostgreSQL 15), a second or more on a busy machine. So the thread keeps the next copy
    ready and drops the used ones while the next tests run: a test waits for neither."""

    def __init__(self, server_url: str, template: str) -> None:
        self.server_url, self.template = server_url, template
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="einmal-clones")
        self._next = self._thread.submit(self._create)
        self._drops: list[Future] = []

    def _create(self) -> str:
        name = f"einmal_t_{uuid.uuid4().hex[:12]}"
        asyncio.run(_admin(self.server_url, f"CREATE DATABASE {name} TEMPLATE {self.template}"))
        return name

    def _drop(self, name: str) -> None:
        asyncio.run(_admin(self.server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

    def take(self) -> str:
        """The name of a fresh copy, the test's own."""
        name = self._next.result()
        self._next = self._thread.submit(self._create)
        return name

    def drop(self, name: str) -> None:
        self._drops.append(self._thread.submit(self._drop, name))
        self._drops = [drop for drop in self._drops if not drop.done() or drop.exception()]

    def close(self) -> None:
        """Drop the spare copy, wait for every drop; a drop that failed fails here."""
        try:
            self.drop(self._next.result())
        finally:
            self._thread.shutdown(wait=True)
        for drop in self._drops:
            drop.result()


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    name = f"einmal_tpl_{os.getpid()}"

    async def build() -> None:
        await _admin(server_url, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
        conn = await asyncpg.connect(with_database(server_url, name))
        try:
            await migrate(conn)
        finally:
            await conn.close()

    asyncio.run(build())
    yield name
    asyncio.run(_admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture(scope="session")
def clones(server_url: str, template_db: str) -> Iterator[Clones]:
    made = Clones(server_url, template_db)
    yield made
    made.close()


@pytest.fixture
def dsn(server_url: str, clones: Clones) -> Iterator[str]:
    """The URL of a fresh, migrated database of this test's own."""
    name = clones.take()
    yield with_database(server_url, name)
    clones.drop(name)


@pytest.fixture
async def conn(dsn: str):
    connection = await asyncpg.connect(dsn)
    yield connection
    await connection.close()


def applied_everything() -> str:
    """What `einmal migrate` prints when it applies every migration to an empty database."""
    return "applied " + ", ".join(f"{version:04d}_{name}" for version, name, _ in db.migrations())


def applied_by(outputs: list[str]) -> list[str]:
    """The migrations several `einmal migrate` runs at once applied between them, in order: each
    migration is its own transaction under the lock, so they may share the work, never repeat it."""
    return sorted(
        name
        for out in outputs
        if out.startswith("applied ")
        for name in out.strip().removeprefix("applied ").split(", ")
    )


def every_migration() -> list[str]:
    return applied_by([applied_everything()])


# a one-click unsubscribe, as the nodes of tests/support/pipeline.py have: without one `campaign create` and
# `approve` refuse a bulk campaign (tests/sending/test_unsubscribe_required.py tests that default)
UNSUBSCRIBE = {
    "EINMAL_UNSUBSCRIBE_URL": "http://127.0.0.1:9/unsubscribe",
    "EINMAL_UNSUBSCRIBE_SECRET": "a-test-key-long-enough-for-einmal-run",
}


def einmal(
    *args: str, dsn: str | None = None, env: dict | None = None, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run the real command line in a child process, with UNSUBSCRIBE set (a variable None in `env`: unset): a
    child of the test fork server (tests/support/forkserver.py), or with TESTS_FORKSERVER=0 `python -m service`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EINMAL_") and k != "DATABASE_URL"}
    full_env.update(UNSUBSCRIBE)
    if dsn:
        full_env["EINMAL_DATABASE_URL"] = dsn
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}
    if forkserver.ENABLED:
        return forkserver.run(list(args), env=full_env, input=input, timeout=timeout)
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
        cwd=ROOT,
    )


def cells(line: str) -> list[str]:
    """The cells of one line of a table the command line prints (service/cli/tables.py): two spaces or more
    between them."""
    return re.split(r" {2,}", line.rstrip())
