"""A loopback TCP port relayed to a server, served by a thread's event loop (so a test that blocks, on
pg_ctl say, does not stall what flows through it).

    with Relay(lambda: asyncio.open_connection("127.0.0.1", port)) as relay:   # or open_unix_connection
        relay.port        # where the client connects
        relay.hold()      # what the server sends is kept here: the client receives nothing, while what
                          # it sends still reaches the server (a standby that answers but falls behind)
        relay.release()   # what was kept is passed on, in order, and what follows flows again
        relay.cut()       # what was kept is dropped, every connection closed, no new one taken
"""

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextlib import suppress

START_SECONDS = 10.0

Upstream = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class Relay:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._listening = threading.Event()
        self._held = False
        self._kept: list[tuple[asyncio.StreamWriter, bytes]] = []  # (to the client, what the server sent)
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    def __enter__(self) -> "Relay":
        self._thread.start()
        assert self._listening.wait(START_SECONDS), "the relay did not start"
        return self

    def __exit__(self, *exc) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def hold(self) -> None:
        self._call(self._hold, True)

    def release(self) -> None:
        self._call(self._hold, False)

    def cut(self) -> None:
        self._call(self._cut)

    def _call(self, function, *args) -> None:
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(_now(function, *args), self._loop).result(timeout=10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._listening.set()
        self._loop.run_forever()

    def _hold(self, held: bool) -> None:
        self._held = held
        if not held:
            for writer, data in self._kept:
                writer.write(data)
            self._kept.clear()

    def _cut(self) -> None:
        self._kept.clear()
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.transport.abort()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await self.upstream()
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer, back=False), self._pipe(up_reader, writer, back=True))
        self._writers -= {writer, up_writer}

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, back: bool) -> None:
        with suppress(OSError):
            while data := await reader.read(65536):
                if back and self._held:
                    self._kept.append((writer, data))
                    continue
                writer.write(data)
                await writer.drain()
        writer.close()


async def _now(function, *args) -> None:
    function(*args)
