"""A database URL with several hosts (`postgresql://…@A,B/db?target_session_attrs=read-write`) that finds
none to use names each host's own cause — refused, read-only, no answer — not only the first host's error.
The read-only host is a real hot standby of the test's cluster (pg_basebackup)."""

import socketserver
import struct
import threading
from collections.abc import Iterator

import anyio
import pytest

from service import db
from tests.conftest import einmal
from tests.support.pgcluster import PgCluster, pg_cluster  # noqa: F401  (fixtures)
from tests.support.smtp_servers import free_port


@pytest.fixture(scope="module")
def standby(pg_cluster: PgCluster) -> Iterator[PgCluster]:
    cluster = PgCluster.standby_of(pg_cluster)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


def test_each_host_is_named_with_its_own_cause(standby: PgCluster) -> None:
    closed = free_port()
    url = f"postgresql://postgres@127.0.0.1:{closed},127.0.0.1:{standby.port}/postgres?target_session_attrs=read-write"
    result = einmal("migrate", dsn=url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"einmal: cannot reach PostgreSQL at 127.0.0.1:{closed},127.0.0.1:{standby.port}/postgres: no host accepts "
        f"writes (target_session_attrs=read-write): 127.0.0.1:{closed}: connection refused; "
        f"127.0.0.1:{standby.port}: read-only (a standby)"
    ), result.stderr


def test_a_read_only_host_alone_is_named_as_read_only_in_one_line(standby: PgCluster) -> None:
    url = f"postgresql://postgres@127.0.0.1:{standby.port}/postgres?target_session_attrs=read-write"
    result = einmal("migrate", dsn=url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"einmal: cannot reach PostgreSQL at 127.0.0.1:{standby.port}/postgres: no host accepts writes "
        f"(target_session_attrs=read-write): 127.0.0.1:{standby.port}: read-only (a standby)"
    ), result.stderr


class StartingUp(socketserver.ThreadingTCPServer):
    """A server on loopback that speaks just enough of PostgreSQL's protocol to answer every login as a
    server still replaying its WAL does: FATAL 57P03, 'the database system is starting up'."""

    daemon_threads = True
    allow_reuse_address = True

    answer = b"SFATAL\0VFATAL\0C57P03\0Mthe database system is starting up\0\0"

    def __init__(self) -> None:
        self.logins = 0
        super().__init__(("127.0.0.1", 0), self.Answer)

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            while True:  # an SSL or GSS request first (refused with 'N'), then the startup packet
                head = self._read(8)
                if len(head) < 8:
                    return
                length, code = struct.unpack("!ii", head)
                self._read(length - 8)
                if code not in (80877103, 80877104):
                    break
                self.request.sendall(b"N")
            self.server.logins += 1
            fields = self.server.answer
            self.request.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)

        def _read(self, n: int) -> bytes:
            data = b""
            while len(data) < n and (chunk := self.request.recv(n - len(data))):
                data += chunk
            return data


class WrongPassword(StartingUp):
    answer = b'SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for user "einmal"\0\0'


@pytest.fixture
def wrong_password() -> Iterator[StartingUp]:
    server = WrongPassword()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_refuses_the_password_is_said_to_refuse_the_login_not_to_be_unreachable(
    wrong_password: StartingUp,
) -> None:
    port = wrong_password.server_address[1]
    result = einmal("campaign", "list", dsn=f"postgresql://einmal:wrong@127.0.0.1:{port}/postgres")
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"einmal: PostgreSQL at 127.0.0.1:{port}/postgres refused the login: "
        'password authentication failed for user "einmal"\n'
    )


@pytest.fixture
def starting_up() -> Iterator[StartingUp]:
    server = StartingUp()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_starting_up_is_one_line_naming_it(starting_up: StartingUp) -> None:
    port = starting_up.server_address[1]
    result = einmal("migrate", dsn=f"postgresql://postgres@127.0.0.1:{port}/postgres")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"einmal: cannot reach PostgreSQL at 127.0.0.1:{port}/postgres: the database system is starting up"
    ), result.stderr


@pytest.mark.anyio
async def test_a_node_waiting_for_its_database_waits_through_a_server_starting_up(starting_up: StartingUp) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{starting_up.server_address[1]}/postgres"
    with pytest.raises(db.DatabaseUnavailable, match="starting up"):
        await db.wait_for_pool(dsn, 1.0)
    assert starting_up.logins >= 3, starting_up.logins  # tried again and again, not given up at the first


class NoSuchDatabase(StartingUp):
    answer = b'SFATAL\0VFATAL\0C3D000\0Mdatabase "nowhere" does not exist\0\0'


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("server", "said"),
    [
        (WrongPassword, 'refused the login: password authentication failed for user "einmal"'),
        (NoSuchDatabase, 'has no such database: database "nowhere" does not exist'),
    ],
)
async def test_a_node_waiting_for_its_database_stops_at_once_when_the_server_refuses_what_it_asks(
    server: type[StartingUp], said: str
) -> None:
    refusing = server()  # a refusal is the answer to what was asked: asking again gets it again
    thread = threading.Thread(target=refusing.serve_forever, daemon=True)
    thread.start()
    try:
        dsn = f"postgresql://einmal:wrong@127.0.0.1:{refusing.server_address[1]}/nowhere"
        with anyio.fail_after(10), pytest.raises(db.DatabaseRefused) as refused:
            await db.wait_for_pool(dsn, None)  # None: for as long as it takes, were it an outage
    finally:
        refusing.shutdown()
        refusing.server_close()
    assert str(refused.value) == f"PostgreSQL at 127.0.0.1:{refusing.server_address[1]}/nowhere {said}"
    assert refusing.logins == 1, refusing.logins
