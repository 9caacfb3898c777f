"""A local SMTP server that captures every message to a folder, for `einmal demo`.

    async with capture_server(Path("demo-out/mail")) as (host, port):
        ...  # point EINMAL_SMTP_HOST/PORT there
    count(folder), duplicates(folder)

It runs aiosmtpd's SMTP protocol in the current asyncio event loop (no thread).
Each message is written to `<folder>/<n>.eml`, n = 1, 2, 3 … continuing after
the files already there, atomically: a hidden temporary file, then a rename,
so a reader never sees half a message. The envelope is kept in front of the
message as `Return-Path:` and `Delivered-To:` headers, as a mail store does.
"""

import asyncio
import os
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.parser import BytesHeaderParser
from pathlib import Path

from aiosmtpd.smtp import SMTP, Envelope, Session

SUFFIX = ".eml"


def _numbers(folder: Path) -> list[int]:
    return [int(p.stem) for p in folder.glob(f"*{SUFFIX}") if p.stem.isdigit()]


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class _Store:
    """The aiosmtpd handler: numbers and writes each message."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.next_number = max(_numbers(folder), default=0) + 1

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        number, self.next_number = self.next_number, self.next_number + 1
        envelope_headers = [f"Return-Path: <{envelope.mail_from or ''}>"]
        envelope_headers += [f"Delivered-To: {rcpt}" for rcpt in envelope.rcpt_tos]
        head = ("\r\n".join(envelope_headers) + "\r\n").encode()
        data = head + (envelope.original_content or b"")
        await asyncio.to_thread(_write_atomically, self.folder / f"{number}{SUFFIX}", data)
        return "250 OK captured"


@asynccontextmanager
async def capture_server(folder: Path, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[tuple[str, int]]:
    """Serve SMTP on (host, port) — port 0 picks a free one — and yield the address bound."""
    store = _Store(folder)
    sessions: set[SMTP] = set()
    loop = asyncio.get_running_loop()

    def factory() -> SMTP:
        protocol = SMTP(store, hostname="einmal-capture", enable_SMTPUTF8=True, loop=loop)
        sessions.difference_update([s for s in sessions if s.transport is None])  # ended ones
        sessions.add(protocol)
        return protocol

    server = await loop.create_server(factory, host=host, port=port)
    try:
        bound_host, bound_port = server.sockets[0].getsockname()[:2]
        yield bound_host, bound_port
    finally:
        server.close()
        for protocol in sessions:  # persistent client connections end with the server
            if protocol.transport is not None:
                protocol.transport.close()
        await server.wait_closed()
        await asyncio.sleep(0)  # let the closed sessions' tasks finish


def message_ids(folder: Path) -> list[str]:
    parser = BytesHeaderParser()
    ids = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        with open(path, "rb") as f:
            message_id = parser.parse(f).get("Message-ID")
        if message_id:
            ids.append(message_id.strip())
    return ids


def count(folder: Path) -> int:
    """How many messages have been captured in folder."""
    return len(_numbers(folder))


def duplicates(folder: Path) -> dict[str, int]:
    """Message-IDs captured more than once, with how many times each was."""
    return {mid: n for mid, n in Counter(message_ids(folder)).items() if n > 1}
