"""The SMTP connection after its set-up: replies parsed as they arrive and queued in order.

aiosmtplib's protocol keeps only a reply that a read is already waiting for, so it
would drop the second and third replies of a pipelined write; this one keeps them.
"""

import asyncio
from collections import deque

from aiosmtplib import SMTPException, SMTPResponse, SMTPResponseException, SMTPServerDisconnected

_MAX_LINE, _MAX_REPLIES = 8192, 8  # bytes of an unfinished reply line; replies queued and not read


def one_line(text: str) -> str:
    return " ".join(text.split())


class Wire(asyncio.Protocol):
    """Replies are parsed as they arrive and queued in order, so a read may start after its reply
    came. Any failure (lost, EOF, timeout, garbage) ends it for good."""

    def __init__(self, transport: asyncio.Transport, timeout: float) -> None:
        self.transport, self.timeout = transport, timeout
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._lines: list[bytes] = []  # the lines so far of a multiline reply
        self._replies: deque[SMTPResponse] = deque()
        self._waiter: asyncio.Future | None = None  # a read() or drain() waiting
        self._paused = False  # the transport's write buffer is over its high-water mark
        self._error: SMTPException | TimeoutError | None = None
        transport.set_protocol(self)

    @property
    def idle(self) -> bool:
        """Usable for a new transaction: alive, and nothing unread (an unsolicited 421 is stale)."""
        return (
            self._error is None
            and not self.transport.is_closing()
            and not self._replies
            and not self._lines
            and not self._buffer
        )

    def write(self, data: bytes) -> None:
        if self._error is not None or self.transport.is_closing():
            raise self._failure()
        self.transport.write(data)

    async def read(self, timeout: float | None = None) -> SMTPResponse:
        if not self._replies and self._error is None:
            await self._wait(timeout or self.timeout)
        if self._replies:
            return self._replies.popleft()
        raise self._failure()

    async def drain(self) -> None:
        if self._paused and self._error is None:
            await self._wait(self.timeout)
        if self._error is not None:
            raise self._failure()

    def close(self) -> None:
        self._fail(SMTPServerDisconnected("Connection closed"))
        self.transport.close()

    # -- asyncio.Protocol ----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start : end + 1])
            start = end + 1
            if not line[:3].isdigit() or line[3:4] not in (b" ", b"-", b"\r", b"\n"):
                text = one_line(line.decode("utf-8", "replace"))[:200]
                self._fail(SMTPResponseException(-1, f"Malformed SMTP response line: {text}"))
                self.transport.close()
                return
            self._lines.append(line[4:].strip(b" \t\r\n"))
            if line[3:4] != b"-":
                message = b"\n".join(self._lines).decode("utf-8", "surrogateescape")
                self._replies.append(SMTPResponse(int(line[:3]), message))
                self._lines = []
        del buffer[:start]
        if len(buffer) > _MAX_LINE or len(self._lines) > 100 or len(self._replies) > _MAX_REPLIES:
            self._fail(SMTPResponseException(-1, "Response too long"))
            self.transport.close()
            return
        self._wake()

    def eof_received(self) -> bool:
        self._fail(SMTPServerDisconnected("Unexpected EOF received"))
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        lost = SMTPServerDisconnected("Connection lost")
        lost.__cause__ = exc
        self._fail(lost)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    # -- inside ----------------------------------------------------------------------------

    async def _wait(self, timeout: float) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout, self._expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _expire(self, waiter: asyncio.Future) -> None:
        if not waiter.done():  # a late reply would be taken for the next command's: end the wire
            self._fail(TimeoutError())

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: SMTPException | TimeoutError) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    def _failure(self) -> BaseException:
        # raised again at most a few times: the connection is dropped at its first failure
        return self._error or SMTPServerDisconnected("Connection lost")
