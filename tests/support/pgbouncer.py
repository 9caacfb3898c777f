"""A real PgBouncer (Debian's `pgbouncer`) on a free loopback port in front of a test's PostgreSQL.

Its configuration is PgBouncer's default but for what a test must say: where it listens, the server it
pools for (every database name, as `*`), trust authentication on loopback, and the pool mode."""

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import pytest

from tests.support.relay import Relay

START_SECONDS = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server(dsn: str) -> tuple[str, int, str]:
    """(host or socket folder, port, user) of the PostgreSQL `dsn` names."""
    parts = urlsplit(dsn)
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    host = parts.hostname or unquote(query.get("host", "127.0.0.1"))
    return host, parts.port or int(query.get("port", 5432)), parts.username or "postgres"


@contextmanager
def _tcp_to(socket_folder: str, port: int) -> Iterator[int]:
    """A loopback TCP port relayed to PostgreSQL's Unix socket in `socket_folder` (the embedded server's,
    in a folder PgBouncer, run as user postgres, may not enter)."""
    path = os.path.join(socket_folder, f".s.PGSQL.{port}")
    with Relay(lambda: asyncio.open_unix_connection(path)) as relay:
        yield relay.port


@contextmanager
def pgbouncer(dsn: str, mode: str, folder: Path) -> Iterator[str]:
    """`with pgbouncer(dsn, "transaction", tmp_path) as url:` the URL of dsn's database through PgBouncer."""
    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
    if binary is None:
        if os.environ.get("CI"):
            raise AssertionError("pgbouncer is not installed (apt-get install pgbouncer)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    host, port, user = _server(dsn)
    with ExitStack() as stack:
        if host.startswith("/"):
            host, port = "127.0.0.1", stack.enter_context(_tcp_to(host, port))
        yield stack.enter_context(_pgbouncer(binary, host, port, user, dsn, mode, folder))


@contextmanager
def _pgbouncer(binary: str, host: str, port: int, user: str, dsn: str, mode: str, folder: Path) -> Iterator[str]:
    listen = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "pgbouncer.log"  # its log, opened here: as user postgres it may not reach `folder`
    folder = Path(tempfile.mkdtemp(prefix="einmal-pgbouncer-"))  # its configuration, where it can read it
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    lines = [
        "[databases]",
        f"* = host={host} port={port}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {listen}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {folder / 'users.txt'}",
        f"pool_mode = {mode}",
        "max_client_conn = 200",
    ]
    if os.geteuid() == 0:  # PgBouncer will not run as root
        lines.append("user = postgres")
    (folder / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        for name in ("users.txt", "pgbouncer.ini"):
            shutil.chown(folder / name, "postgres")
    with open(log, "ab") as out:
        proc = subprocess.Popen([binary, str(folder / "pgbouncer.ini")], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"pgbouncer exited {proc.returncode}: {log.read_text()[-2000:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", listen)) == 0:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"pgbouncer did not listen on 127.0.0.1:{listen} within {START_SECONDS:g}s")
            time.sleep(0.05)
        parts = urlsplit(dsn)
        yield urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{listen}", query=""))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
