"""HTTP: serves service.web's app with Uvicorn, as one actor under the node's supervisor.

The listening socket is bound once, before the actors start (a busy or
forbidden address stops the command with one line), and kept across
restarts: each run of the actor serves a duplicate of it, which Uvicorn may
close when it stops. Uvicorn's own signal handling is off: the node drains
on SIGTERM itself. Cancelled (the node stops), the server stops accepting,
lets requests under way finish for up to GRACE_SECONDS and ends.
"""

import contextlib
import logging
import socket
from collections.abc import Iterator

import anyio
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp

from service import sockets

log = logging.getLogger("einmal.http")

GRACE_SECONDS = 3.0
STARTED_POLL_SECONDS = 0.01


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
    def __init__(self, app: ASGIApp, sock: socket.socket) -> None:
        self.app, self.sock = app, sock

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        config = uvicorn.Config(self.app, lifespan="off", log_config=None, access_log=False,
                                timeout_graceful_shutdown=GRACE_SECONDS, server_header=False,
                                backlog=4096, h11_max_incomplete_event_size=16 * 1024)
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
                log.info("serving HTTP on %s", url(self.sock))
                task_status.started()
                await ended.wait()
                raise RuntimeError("the HTTP server stopped")
            finally:
                server.should_exit = True
