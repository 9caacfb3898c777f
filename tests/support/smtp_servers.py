"""Real SMTP servers on 127.0.0.1 for tests, with faults injected at runtime.

    server = FaultServer()                      # a free port, picked now; advertises PIPELINING
    FaultServer(pipelining=False)               # does not: a client must send one command at a time
    FaultServer(smtputf8=True)                  # offers SMTPUTF8 (by default it does not)
    server.start()                              # a thread with its own event loop (aiosmtpd)
    server.inject("rcpt", "550 5.1.1 no such user", domain="bounce.test")
    server.inject("mail", "421 4.3.2 shutting down", times=1)     # replies, then closes
    server.inject("data", MID_DATA)             # 354, then the connection dies mid-body
    server.inject("data_end", DROP, probability=0.002)   # the dot arrived, no reply ever
    server.inject("data_end", None, delay=3)    # a slow 250
    server.messages                             # every message the server has (Received)
    server.wait_for(3) / await server.arrived(3)   # block / await until it has 3
    server.duplicates()                         # Message-IDs it holds more than once
    server.pipelined                            # MAIL commands that arrived with RCPT already behind them
    server.stop(); server.start()               # down, then up again on the same port

Stages: "mail", "rcpt", "data" (the DATA command), "data_end" (after the final dot).
A fault's reply is the reply text, DROP (close without replying), MID_DATA (only at
"data"), or None (the normal reply, after `delay` seconds). Faults are tried in the
order injected; the first that matches fires. Probabilities draw from one
random.Random(seed), so a run is repeatable for a given order of commands.

aiosmtpd reads each command line from a buffered stream and answers in order, so
pipelined commands (RFC 2920) are handled as they should be: offering PIPELINING is
a one-line EHLO change. Replies to pipelined commands are sent in one write, when no
command is left to read (as Postfix does). A fault at "mail" or "rcpt" then also answers the commands
the client pipelined behind it: 503 for RCPT and DATA after a refused MAIL, 503 for
DATA after a refused RCPT, nothing after a 421 or DROP (the connection is gone).

A message whose final dot arrived is recorded even when the fault then drops the
connection (answered=False): the server has it, so it counts as delivered.
"""

import asyncio
import random
import re
import socket
import ssl
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import MISSING, SMTP, AuthResult

DROP = "<drop the connection without replying>"
MID_DATA = "<reply 354, read one line of the body, then drop the connection>"
STAGES = ("mail", "rcpt", "data", "data_end")
_MESSAGE_ID = re.compile(rb"^message-id:[ \t]*(\S*)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Certificate:
    cert: Path  # self-signed for 127.0.0.1 and localhost: also the CA file a client trusts
    key: Path


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes  # as the server has it: dot-unstuffed, CRLF line endings
    message_id: str | None
    answered: bool  # False: the final dot arrived but the connection was dropped unanswered
    connection: int
    at: float = 0.0  # time.monotonic() when the final dot arrived


@dataclass
class _Fault:
    stage: str
    reply: str | None
    domain: str | None
    times: int | None
    probability: float
    delay: float


def make_certificate(directory: Path) -> Certificate:
    """A self-signed certificate for 127.0.0.1 / localhost, made with the openssl command."""
    cert, key = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return Certificate(cert, key)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _FaultSMTP(SMTP):
    """aiosmtpd's SMTP session, plus DROP / MID_DATA / 421-closes, and a connection number."""

    def __init__(self, owner: "FaultServer", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.number = owner._next_number()
        self._held = bytearray()  # replies to pipelined commands, sent when no command is left unread

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.owner._live.add(self)

    def connection_lost(self, error: Exception | None) -> None:
        self.owner._live.discard(self)
        super().connection_lost(error)

    async def smtp_MAIL(self, arg: str) -> None:
        if self._reader is not None and bytes(self._reader._buffer[:5]).upper() == b"RCPT ":
            self.owner._count_pipelined()  # RCPT was sent before MAIL's reply
        await super().smtp_MAIL(arg)

    async def push(self, status: str | bytes) -> None:
        text = status.decode() if isinstance(status, bytes) else status
        if self.transport is None or self.transport.is_closing():
            return
        if self._held:
            self.transport.write(bytes(self._held))  # before anything else, in order
            self._held.clear()
        if text in (DROP, MID_DATA):
            self.transport.abort()
            # connection_lost() (scheduled by abort) cancels this session: wait for it, or aiosmtpd would
            # go on parsing what is left in its read buffer (the rest of a body) as commands
            await asyncio.sleep(0)
            return
        if self.owner.pipelining and not text.startswith("421") and self._reader._buffer:
            # More commands are waiting: batch the replies into one write, as Postfix does (RFC 2920 §3.2)
            # so a client must be ready for several replies in one read
            self._held += text.encode("utf-8" if self.enable_SMTPUTF8 else "ascii") + b"\r\n"
            return
        await super().push(status)
        if text.startswith("421") and self.transport is not None:
            self.transport.close()

    async def smtp_DATA(self, arg: str) -> None:
        ready = self.envelope is not None and self.envelope.rcpt_tos and not arg
        fault = self.owner._decide("data", None) if ready else None
        if fault is not None:
            await asyncio.sleep(fault.delay)
            if fault.reply == MID_DATA:
                await self.push("354 End data with <CR><LF>.<CR><LF>")
                await self._reader.readuntil(b"\r\n")
                # stop reading and give a client with a body bigger than the socket buffers time to block
                # on them, so the reset reaches it before it could write the final dot
                self.transport.pause_reading()
                await asyncio.sleep(0.3)
                await self.push(DROP)
                return
            if fault.reply is not None:
                await self.push(fault.reply)
                return
        await super().smtp_DATA(arg)


class _Hooks:
    def __init__(self, owner: "FaultServer"):
        self.owner = owner

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname  # what aiosmtpd does itself when there is no hook
        if self.owner.pipelining:
            responses.insert(-1, "250-PIPELINING")
        return responses

    async def handle_MAIL(self, server, session, envelope, address, options):
        if self.owner.users is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        self.owner._mail_connections.add(server.number)
        return await self.owner._apply("mail", None, MISSING)

    async def handle_RCPT(self, server, session, envelope, address, options):
        with self.owner._lock:
            self.owner._rcpts.append((time.monotonic(), address))
        return await self.owner._apply("rcpt", address, MISSING)

    async def handle_DATA(self, server, session, envelope):
        fault = self.owner._decide("data_end", None)
        reply = fault.reply if fault else None
        if reply is None or reply == DROP or reply.startswith("2"):
            self.owner._record(envelope, server.number, answered=reply != DROP)
        if fault is not None:
            await asyncio.sleep(fault.delay)
        return reply or f"250 2.0.0 Ok: queued as {len(self.owner._messages)}"


class FaultServer:
    def __init__(
        self,
        *,
        port: int | None = None,
        tls: str | None = None,
        certificate: Certificate | None = None,
        users: dict[str, str] | None = None,
        seed: int = 0,
        pipelining: bool = True,
        smtputf8: bool = False,
    ):
        assert tls in (None, "starttls", "tls")
        assert tls is None or certificate is not None, "TLS needs a certificate"
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.tls, self.certificate, self.users = tls, certificate, users
        self.pipelining, self.smtputf8 = pipelining, smtputf8
        self._lock = threading.Condition()
        self._faults: list[_Fault] = []
        self._random = random.Random(seed)
        self._messages: list[Received] = []
        self._rcpts: list[tuple[float, str]] = []  # (time.monotonic(), address) of every RCPT TO
        self._mail_connections: set[int] = set()
        self._pipelined = 0
        self._numbers = 0
        self._live: set[_FaultSMTP] = set()  # touched only on the server's loop
        self._controller: Controller | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> "FaultServer":
        assert self._controller is None, "already running"
        kwargs: dict = {
            "hostname": self.host,
            "port": self.port,
            "server_hostname": "einmal-test.local",
            "ready_timeout": 10.0,
            "data_size_limit": None,
            "enable_SMTPUTF8": self.smtputf8,
        }
        if self.tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.certificate.cert, self.certificate.key)
            if self.tls == "tls":
                kwargs["ssl_context"] = context
            else:
                kwargs.update(tls_context=context, require_starttls=True)
        if self.users is not None:
            kwargs.update(authenticator=self._authenticate, auth_require_tls=False)
        owner = self

        class _Controller(Controller):
            def factory(self):
                return _FaultSMTP(owner, self.handler, **self.SMTP_kwargs)

        controller = _Controller(_Hooks(self), **kwargs)
        controller.start()
        self._controller = controller
        return self

    def stop(self) -> None:
        """Drop every open connection and stop listening; records and faults are kept."""
        if self._controller is None:
            return
        self.disconnect_all()
        self._controller.stop()
        self._controller = None

    @property
    def running(self) -> bool:
        return self._controller is not None

    def disconnect_all(self) -> None:
        """Abort every open client connection (as a crashed or restarted server would)."""
        if self._controller is None:
            return

        async def abort() -> None:
            for session in list(self._live):
                if session.transport is not None:
                    session.transport.abort()

        asyncio.run_coroutine_threadsafe(abort(), self._controller.loop).result(timeout=10)

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------

    def inject(
        self,
        stage: str,
        reply: str | None = None,
        *,
        domain: str | None = None,
        times: int | None = None,
        probability: float = 1.0,
        delay: float = 0.0,
    ) -> None:
        assert stage in STAGES, stage
        assert reply != MID_DATA or stage == "data", "MID_DATA only at the DATA command"
        with self._lock:
            self._faults.append(_Fault(stage, reply, domain and domain.lower(), times, probability, delay))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def seed(self, seed: int) -> None:
        with self._lock:
            self._random.seed(seed)

    # -- what the server saw ---------------------------------------------------------

    @property
    def messages(self) -> list[Received]:
        with self._lock:
            return list(self._messages)

    @property
    def rcpts(self) -> list[tuple[float, str]]:
        """(time.monotonic(), address) of every RCPT TO, answered or refused."""
        with self._lock:
            return list(self._rcpts)

    @property
    def connections(self) -> int:
        """How many distinct connections began at least one mail transaction."""
        with self._lock:
            return len(self._mail_connections)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block until the server holds at least `count` messages; AssertionError after `timeout`."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._messages) >= count, timeout):
                raise AssertionError(f"server has {len(self._messages)} messages, expected {count}")
            return list(self._messages)

    async def arrived(self, count: int) -> list[Received]:
        """wait_for() that leaves the test's event loop running (bound it with anyio.fail_after)."""
        return await anyio.to_thread.run_sync(self.wait_for, count, 600.0, abandon_on_cancel=True)

    @property
    def pipelined(self) -> int:
        """How many MAIL commands arrived with a RCPT already sent behind them (pipelined)."""
        with self._lock:
            return self._pipelined

    def duplicates(self) -> dict[str, int]:
        """Message-IDs the server holds more than once, with their counts."""
        counts = Counter(m.message_id for m in self.messages)
        return {message_id: n for message_id, n in counts.items() if n > 1}

    # -- called on the server's loop -------------------------------------------------

    def _next_number(self) -> int:
        with self._lock:
            self._numbers += 1
            return self._numbers

    def _count_pipelined(self) -> None:
        with self._lock:
            self._pipelined += 1

    def _decide(self, stage: str, address: str | None) -> _Fault | None:
        domain = address.rpartition("@")[2].lower() if address else None
        with self._lock:
            for fault in self._faults:
                # `domain` names a domain, or one address when it holds an @
                where = address.lower() if address and fault.domain and "@" in fault.domain else domain
                if fault.stage != stage or (fault.domain is not None and fault.domain != where):
                    continue
                if fault.probability < 1.0 and self._random.random() >= fault.probability:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    async def _apply(self, stage: str, address: str | None, default):
        fault = self._decide(stage, address)
        if fault is None:
            return default
        await asyncio.sleep(fault.delay)
        return default if fault.reply is None else fault.reply

    def _record(self, envelope, connection: int, *, answered: bool) -> None:
        data = envelope.original_content
        head = data.split(b"\r\n\r\n", 1)[0]
        found = _MESSAGE_ID.search(head)
        message_id = found.group(1).decode("ascii", "replace") if found else None
        received = Received(
            envelope.mail_from, tuple(envelope.rcpt_tos), data, message_id, answered, connection, time.monotonic()
        )
        with self._lock:
            self._messages.append(received)
            self._lock.notify_all()

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        login = auth_data.login.decode("utf-8", "replace")
        password = auth_data.password.decode("utf-8", "replace")
        ok = self.users is not None and self.users.get(login) == password
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd sends the 535


# -- fixtures (re-exported by tests/conftest.py) ----------------------------------------


@pytest.fixture(scope="session")
def smtp_certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    return make_certificate(tmp_path_factory.mktemp("smtp-tls"))


@pytest.fixture
def make_smtp_server() -> Iterator:
    """A factory: make_smtp_server(**FaultServer kwargs, start=True); all are stopped after the test."""
    servers: list[FaultServer] = []

    def make(*, start: bool = True, **kwargs) -> FaultServer:
        server = FaultServer(**kwargs)
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def smtp_server(make_smtp_server) -> FaultServer:
    """A started plain SMTP server on 127.0.0.1 that accepts everything until told otherwise."""
    return make_smtp_server()
