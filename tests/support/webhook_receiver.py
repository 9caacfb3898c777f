"""A real HTTP/1.1 receiver of webhooks on 127.0.0.1, in the test's event loop: it records each request
(when, path, headers, body) and answers as `decide(request)` says: a status with headers, or HANG (it holds
the connection without a word until the client gives up, at most HANG_LIMIT seconds). Requests are bounded:
64 KiB of headers and 1 MiB of body."""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketStream

HANG_LIMIT = 60.0
MAX_HEAD, MAX_BODY = 65536, 1 << 20


@dataclass
class Request:
    at: float  # time.monotonic()
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"


HANG = Answer(status=0)


class Receiver:
    """`async with Receiver(decide) as receiver:` serving at `receiver.url(path)`."""

    def __init__(self, decide: Callable[[Request], Answer] | None = None, port: int = 0) -> None:
        self.decide = decide or (lambda _r: Answer())
        self.requests: list[Request] = []
        self.connections = 0  # accepted, whatever came over them (a TLS hello to this plain server too)
        self.port = port  # 0: any free one; a receiver started again on its port takes the port it had

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def __aenter__(self) -> "Receiver":
        # CPython 3.11's sock_accept sets the result of a future already cancelled when a connection arrives just
        # as `kill` cancels the accept (InvalidStateError, raised in a loop callback, fixed in later Pythons):
        # that alone is no failure of the test, so it is passed over; anything else goes where it went
        loop = asyncio.get_running_loop()
        before = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
            if isinstance(context.get("exception"), asyncio.InvalidStateError):
                return
            if before is not None:
                before(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)
        self._restore = lambda: loop.set_exception_handler(before)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(None, None, None)
        finally:
            self._restore()

    async def start(self) -> None:
        """Listen (again, after `kill`: on the same port)."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._scope = anyio.CancelScope()

        async def serve() -> None:
            with self._scope:
                async with listener:
                    await listener.serve(self._serve)

        self._tg.start_soon(serve)

    def kill(self) -> None:
        """Stop listening and drop every connection at once: a receiver gone, its requests unanswered."""
        self._scope.cancel()

    async def _serve(self, stream: SocketStream) -> None:
        self.connections += 1
        async with stream:
            try:
                await self._one(stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, ValueError):
                return

    async def _one(self, stream: SocketStream) -> None:
        data = b""
        with anyio.fail_after(10):
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
                if len(data) > MAX_HEAD:
                    raise ValueError("head too long")
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        _method, path, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if length > MAX_BODY:
            raise ValueError("body too long")
        with anyio.fail_after(10):
            while len(body) < length:
                body += await stream.receive()
        request = Request(time.monotonic(), path, headers, body[:length])
        self.requests.append(request)
        answer = self.decide(request)
        if answer is HANG:
            with anyio.move_on_after(HANG_LIMIT):
                while await stream.receive():  # until the client closes
                    pass
            return
        extra = "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
        await stream.send(
            f"HTTP/1.1 {answer.status} X\r\nContent-Length: {len(answer.body)}\r\n"
            f"Connection: close\r\n{extra}\r\n".encode()
            + answer.body
        )

    def ids(self) -> list[str]:
        return [r.headers.get("webhook-id", "") for r in self.requests]

    async def wait_for(self, check: Callable[[], bool], timeout: float) -> None:
        """Until `check()`, polled every 50 ms, at most `timeout` seconds (then AssertionError)."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g}s; {len(self.requests)} requests so far")
            await anyio.sleep(0.05)
