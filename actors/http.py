"""HTTP: serves service.web's app with Uvicorn, as one actor under the node's supervisor.

The listening socket is bound once, before the actors start (a busy or
forbidden address stops the command with one line), and kept across
restarts: each run of the actor serves a duplicate of it, which Uvicorn may
close when it stops. Uvicorn's own signal handling is off: the node drains
on SIGTERM itself. Cancelled (the node stops), the server stops accepting,
lets requests under way finish for up to GRACE_SECONDS and ends.

Uvicorn's h11 protocol gets the bounds it lacks (docs/design.md#listening-surface): a
request's head must arrive within EINMAL_HTTP_HEADER_TIMEOUT_SECONDS of the
connection waiting for it (opened, or its previous response sent), its body
within EINMAL_HTTP_BODY_TIMEOUT_SECONDS of the head; else the connection is
closed. So is one whose client has taken nothing of its answers for as long
as that (writing paused: the socket's buffers are full). A request answered before its body was read (e.g. 413) ends the
connection: its sending half at once, the rest at the deadline or when the
client closes. Connections at once are at most EINMAL_HTTP_MAX_CONNECTIONS and a quarter of
the soft file limit (the database, SMTP and inbound sockets keep the rest), and at most
EINMAL_HTTP_CLIENT_CONNECTIONS of them from one client network (service/clients.py: an IPv4 /24, an
IPv6 /64), so that one network's flood leaves the rest to the others; at either cap a new connection
closes the one (of its network, at the network's cap) that has waited longest for a request head, or,
when every one is inside a request, is answered 503.
"""

import asyncio
import contextlib
import functools
import ipaddress
import logging
import resource
import socket
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import h11
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from actors import sockets
from service import clients
from service.settings import Settings

log = logging.getLogger("einmal.http")

GRACE_SECONDS = 3  # uvicorn takes whole seconds
STARTED_POLL_SECONDS = 0.01


BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 5\r\nConnection: close\r\n\r\n"


def raise_file_limit() -> None:
    """Raise this process's soft limit on open files to the hard one (1024 is a common default)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # e.g. an unlimited hard limit above the kernel's
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def file_limit() -> int:
    """The soft limit on open files."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class HttpConfig:
    """The HTTP actor's section of the settings."""

    max_connections: int
    header_seconds: float
    body_seconds: float
    client_connections: int

    @classmethod
    def of(cls, settings: Settings) -> "HttpConfig":
        return cls(
            settings.http_max_connections,
            settings.http_header_timeout_seconds,
            settings.http_body_timeout_seconds,
            settings.http_client_connections,
        )


@dataclass
class Limits:
    """One server's bounds, shared by its connections; `waiting`: those waiting for a request head, oldest first;
    `open`: the connections open now per client network."""

    connections: int
    header_seconds: float
    body_seconds: float
    per_client: int = 1 << 30
    proxies: str | list[str] = ""  # Uvicorn's forwarded_allow_ips: peers that carry many clients' requests
    waiting: OrderedDict["_Protocol", None] = field(default_factory=OrderedDict)
    open: Counter[str] = field(default_factory=Counter)
    total: int = 0  # the connections open now

    @classmethod
    def of(cls, config: HttpConfig) -> "Limits":
        connections = min(config.max_connections, max(file_limit() // 4, 1))
        return cls(connections, config.header_seconds, config.body_seconds, min(config.client_connections, connections))

    def network(self, host: str | None) -> str:
        """What a peer's connections count as: its network (service/clients.py), or, for a reverse proxy Uvicorn
        takes X-Forwarded-For from (FORWARDED_ALLOW_IPS), its own address, which no share bounds: its
        connections are many clients'."""
        return f"proxy {host}" if host and _trusted(host, self.proxies) else clients.network(host)

    def make_room(self, network: str) -> bool:
        """Close the connection that waited longest for a head — the network's own when it is at its share —
        if the server or the network is at its cap; False when none can be closed (every one is in a request)."""
        if self.open[network] >= self.per_client and not network.startswith("proxy "):
            oldest = next((p for p in self.waiting if p.network == network), None)
        elif self.total >= self.connections:
            oldest = next(iter(self.waiting), None)
        else:
            return True
        if oldest is None:
            return False
        self.waiting.pop(oldest)
        oldest.transport.abort()
        return True


def _trusted(host: str, proxies: str | list[str]) -> bool:
    """Whether `host` is one of Uvicorn's trusted proxies (a comma-separated list or a list of addresses and
    networks; "*": every peer)."""
    names = [p.strip() for p in (proxies.split(",") if isinstance(proxies, str) else proxies) if p.strip()]
    if "*" in names:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host in names
    for name in names:
        with contextlib.suppress(ValueError):
            if address in ipaddress.ip_network(name, strict=False):
                return True
    return False


class _Protocol(H11Protocol):
    """Uvicorn's h11 protocol under the module's bounds: deadlines for a head and a body, the cap."""

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any) -> None:  # the rest: H11Protocol's own
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.phase: str | None = None  # "head" or "body": what the connection waits for, under a deadline
        self.deadline: asyncio.TimerHandle | None = None
        self.stalled: asyncio.TimerHandle | None = None  # the client has stopped taking what it is sent
        self.network: str | None = None  # the client's network (service/clients.py) while it is served

    # a stream protocol is always given a Transport, narrower than BaseProtocol says (uvicorn overrides so too)
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        network = self.limits.network(peer[0] if isinstance(peer, tuple) and peer else None)
        if not self.limits.make_room(network):
            transport.write(BUSY)
            transport.close()
            return
        self.network = network
        self.limits.open[network] += 1
        self.limits.total += 1
        super().connection_made(transport)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_phase(None)
        self.limits.waiting.pop(self, None)
        self._unstall()
        if self.network is not None:  # else refused at the cap: never served
            self.limits.open[self.network] -= 1
            self.limits.total -= 1
            if not self.limits.open[self.network]:
                del self.limits.open[self.network]
            self.network = None
            super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.stalled is None:
            self.stalled = self.loop.call_later(self.limits.body_seconds, self._expired)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._unstall()

    def _unstall(self) -> None:
        if self.stalled is not None:
            self.stalled.cancel()
            self.stalled = None

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # answered before its body was read (e.g. 401, 413): the rest of it is read and dropped, until the
            # client closes or the body's deadline (counted from the head, not reset); closed at once, the client
            # could lose the answer. It holds nothing anyone waits for: at a cap it is closed first.
            self.transport.write_eof()
            self._watch()
            self.limits.waiting[self] = None
            return
        self._watch()

    def _watch(self) -> None:
        state = self.conn.their_state
        self._set_phase("head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None)

    def _set_phase(self, phase: str | None) -> None:
        if phase == self.phase:
            return
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.limits.waiting.pop(self, None)
        self.phase = phase
        if phase is not None and not self.transport.is_closing():
            seconds = self.limits.header_seconds if phase == "head" else self.limits.body_seconds
            self.deadline = self.loop.call_later(seconds, self._expired)
            if phase == "head":
                self.limits.waiting[self] = None

    def _expired(self) -> None:
        log.debug(
            "HTTP connection from %s closed: %s",
            self.client,
            f"no complete request {self.phase} in time" if self.phase else "its answer not taken in time",
        )
        self.transport.abort()


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the node handles SIGTERM and SIGINT
        yield


def bind(address: str) -> socket.socket:
    """The HTTP socket for EINMAL_HTTP_ADDRESS (port 0: a free one)."""
    return sockets.bind(address, "EINMAL_HTTP_ADDRESS")


def url(sock: socket.socket) -> str:
    """http://host:port of a bound socket (an unspecified host shown as loopback)."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class HttpActor:
    def __init__(self, app: ASGIApp, sock: socket.socket, config: HttpConfig) -> None:
        self.app, self.sock, self.config = app, sock, config

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        limits = Limits.of(self.config)
        # the backlog is also how many connections one wake-up of the loop accepts before any is closed
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=GRACE_SECONDS,
            server_header=False,
            # uvicorn only calls what it is given: a factory serves as the protocol class
            http=cast("type[asyncio.Protocol]", functools.partial(_Protocol, limits=limits)),
            ws="none",
            backlog=min(4096, max(file_limit() // 8, 16)),
            h11_max_incomplete_event_size=16 * 1024,
        )
        limits.proxies = config.forwarded_allow_ips if config.proxy_headers else ""
        server = _Server(config)
        ended = anyio.Event()

        async def serve() -> None:
            try:
                with anyio.CancelScope(shield=True):  # stopped by should_exit, so requests under way finish
                    await server.serve(sockets=[self.sock.dup()])
            finally:
                ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                while not server.started:
                    if ended.is_set():
                        raise RuntimeError("the HTTP server stopped while starting")
                    await anyio.sleep(STARTED_POLL_SECONDS)
                log.info("serving HTTP on %s (at most %d connections)", url(self.sock), limits.connections)
                task_status.started()
                await ended.wait()
                raise RuntimeError("the HTTP server stopped")
            finally:
                server.should_exit = True
