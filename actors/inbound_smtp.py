"""Inbound SMTP (or LMTP): bounces and complaints come back, as one actor under the node's supervisor.

With EINMAL_INBOUND_SMTP_ADDRESS set the node listens there (aiosmtpd) for mail to the return
path: ``bounces@domain`` and ``bounces+<token>@domain`` (EINMAL_RETURN_PATH, and each account's own
return path, whose tokens verify with that account's secret for its own campaigns only). Any other
recipient is refused with 550, a token that does not verify with 550 5.7.1, a second recipient
in one transaction with 452 (the client sends it again, alone), a message over
EINMAL_INBOUND_MAX_BYTES with 552; a connection idle for EINMAL_INBOUND_TIMEOUT_SECONDS is
closed; past MAX_SESSIONS sessions at once a connection is answered 421 and closed, so the
memory the listener holds is bounded. A message is then (service/inbound/bounces.py, docs/design.md#inbound-events):

- a report to the return path without a token, quoting no envelope sender whose token verifies
  (ARF's Original-Mail-From, the returned Return-Path): 250, nothing written, one log line,
  counted ``unsigned`` (a Message-ID in it could be anyone's guess);
- past a report's bounds (MIME parts, recipients): 552 5.3.4; a message that cannot be read at all
  (a multipart without its boundary): 550 5.6.0; nothing written;
- not a bounce or complaint (an auto-reply), or a report that touches no row (no such row, none of several recipients is
  the row's address, a message that was never sent): 250, one log line, nothing written (counted);
- a bounce of any format (hard, soft, or unclassified: recorded, suppressing nothing) or a
  complaint: applied once, as its reason says, to the token's row alone, through inbound.apply, then
  250; a repeat: 250, nothing changes; the same report id with other content: 554; the
  database unreachable, or no parser to be had: 451 (the relay tries again later).

Reports are parsed in worker processes (anyio.to_process), at most half the cores at once, so
a flood of them neither stalls this node's event loop nor takes every core; MAX_WAITING more
may wait, and a report not read within PARSE_SECONDS is answered 451 (its worker killed).
The socket is bound before the actors start and kept across restarts, like the HTTP actor's.
"""

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.to_process
import asyncpg
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import MISSING, SMTP, Envelope, Session
from anyio import BrokenWorkerProcess
from anyio.abc import TaskStatus

from actors import sockets
from service import db
from service.errors import Conflict
from service.inbound import bounces
from service.mail.verp import ReturnPath
from service.metrics import Metrics
from service.settings import Settings

log = logging.getLogger("einmal.inbound")

Recorded = tuple[bounces.Report | None, str]  # bounces.record's: the report applied, and what it did

MAX_SESSIONS = 64  # SMTP sessions at once, each holding up to EINMAL_INBOUND_MAX_BYTES; one more hears 421
BUSY_LOG_SECONDS = 10.0  # one log line a while for the connections answered 421
MAX_WAITING = 8  # reports waiting for a parser when every one is busy; one more is answered 451
PARSE_SECONDS = 30.0  # waiting for a parser and parsing one report


class NoParser(Exception):
    """No worker process read the report in time: the relay is asked to try again."""


def bind(address: str) -> socket.socket:
    """The listening socket for EINMAL_INBOUND_SMTP_ADDRESS (port 0: a free one)."""
    return sockets.bind(address, "EINMAL_INBOUND_SMTP_ADDRESS", backlog=128)


@dataclass(frozen=True)
class InboundConfig:
    """The inbound actor's section of the settings; the subject's calls that read more of them, bound."""

    protocol: str  # EINMAL_INBOUND_PROTOCOL: smtp | lmtp
    max_bytes: int
    timeout_seconds: float
    return_paths: Callable[[asyncpg.Pool], bounces.ReturnPaths]  # the environment's and the accounts'
    record: Callable[[asyncpg.Connection, tuple[bounces.Report, ...], tuple[int, int]], Awaitable[Recorded]]

    @classmethod
    def of(cls, settings: Settings) -> "InboundConfig":
        path = ReturnPath.from_settings(settings)
        if path is None:  # Settings refuses EINMAL_INBOUND_SMTP_ADDRESS without it
            raise ValueError("the inbound listener needs EINMAL_RETURN_PATH")
        return cls(
            settings.inbound_protocol,
            settings.inbound_max_bytes,
            settings.inbound_timeout_seconds,
            lambda pool: bounces.ReturnPaths(settings, path, pool),
            lambda conn, found, row_ids: bounces.record(conn, settings, found, row_ids),
        )


class Handler:
    """aiosmtpd's handler: checks recipients, reads and applies reports."""

    def __init__(self, config: InboundConfig, pool: asyncpg.Pool, metrics: Metrics) -> None:
        self.config, self.pool = config, pool
        self.paths = config.return_paths(pool)
        self.counted = metrics.inbound
        self.parsers = anyio.CapacityLimiter(max(1, (os.cpu_count() or 2) // 2))  # worker processes at once

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        try:  # the environment's return path is checked without the database
            if not self.paths.env.ours(address)[0]:
                await self.paths.load()
            paths, token = self.paths.find(address)
            valid = token is None or await self.paths.verify(paths, token) is not None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            log.warning("inbound: recipient %.100r not checked, the relay will retry: %s", address, exc)
            return "451 4.3.0 cannot check the recipient now, try again later"
        if not paths:
            log.info("inbound: refused recipient %.100r: not the return path", address)
            self.counted.labels("refused").inc()
            return "550 5.1.1 mailbox unavailable: only the return path takes mail here"
        if not valid:
            log.info("inbound: refused recipient %.100r: the VERP token does not verify", address)
            self.counted.labels("refused").inc()
            return "550 5.7.1 return path token not valid"
        if envelope.rcpt_tos:
            return "452 4.5.3 one recipient per message, please send this one again"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        paths, token = self.paths.find(envelope.rcpt_tos[0])
        data = envelope.original_content or b""
        try:
            bounces.bounded(data)  # before a worker is taken
            found = await self._parse(data)
        except bounces.TooLarge as exc:
            return self._refused(envelope, exc, "552 5.3.4 too large for a report")
        except bounces.Malformed as exc:
            return self._refused(envelope, exc, "550 5.6.0 not a readable report")
        except NoParser as exc:
            log.warning("inbound: a message from %.100r not read, the relay will retry: %s", envelope.mail_from, exc)
            return "451 4.3.0 cannot read the report now, try again later"
        if not found:
            log.info("inbound: ignored a message from %.100r: not a bounce or complaint report", envelope.mail_from)
            self.counted.labels("ignored").inc()
            return "250 2.0.0 OK, ignored"
        try:  # a token that does not verify stopped at RCPT
            row_ids = await self.paths.verify(paths, token) if token else None
            row_ids = row_ids or await self._quoted_token(found)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            log.warning("inbound: a report not recorded, the relay will retry: %s", exc)
            return "451 4.3.0 cannot record the report now, try again later"
        if row_ids is None:
            log.info(
                "inbound: unsigned: a report from %.100r to the return path with no VERP token changes nothing",
                envelope.mail_from,
            )
            self.counted.labels("unsigned").inc()
            return "250 2.0.0 OK, unsigned: nothing done"
        try:
            async with db.acquire(self.pool) as conn:
                report, result = await self.config.record(conn, found, row_ids)
        except Conflict as exc:  # the same report id with other content
            log.warning("inbound: refused %s: %s", found[0].event_id[:120], exc)
            self.counted.labels("refused").inc()
            return "554 5.6.0 report id already used for other content"
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            log.warning("inbound: %s not recorded, the relay will retry: %s", found[0].event_id[:120], exc)
            return "451 4.3.0 cannot record the report now, try again later"
        where = f"campaign {row_ids[0]} subscriber {row_ids[1]}"
        if report is None or result.startswith("dropped"):
            log.info(
                "inbound: dropped %s %s for %s: %s",
                found[0].kind,
                (report or found[0]).event_id[:120],
                where,
                result.removeprefix("dropped: "),
            )
            self.counted.labels("dropped").inc()
            return "250 2.0.0 OK, dropped"
        log.info(
            "inbound: %s %s (%s, %s) for %s: %s",
            report.kind,
            report.event_id[:120],
            report.status or "no status",
            report.reason or "-",
            where,
            result,
        )
        if report.reason == "sender":  # the address is untouched; our return path or sending host is the problem
            log.warning(
                "inbound: a server refused our sender, not %s's address (configuration: the return path's "
                "domain, DNS, SPF): %.200s",
                where,
                report.diagnostic,
            )
        self.counted.labels(result).inc()
        return "250 2.0.0 OK"

    async def _quoted_token(self, found: tuple[bounces.Report, ...]) -> tuple[int, int] | None:
        """The row named by a verified token in the envelope sender a report quotes (a feedback loop
        writes to one fixed address, but returns the message with its return path)."""
        for sender in {sender: None for report in found for sender in report.returned_senders}:
            if not self.paths.env.ours(sender)[0]:
                await self.paths.load()
            paths, token = self.paths.find(sender)
            if paths and token and (row_ids := await self.paths.verify(paths, token)):
                return row_ids
        return None

    async def _parse(self, data: bytes) -> tuple[bounces.Report, ...]:
        """bounces.parse in a worker process; NoParser when none is free soon enough."""
        if self.parsers.available_tokens == 0 and self.parsers.statistics().tasks_waiting >= MAX_WAITING:
            raise NoParser(f"{MAX_WAITING} reports already wait for a parser")
        try:
            with anyio.fail_after(PARSE_SECONDS):
                return await anyio.to_process.run_sync(bounces.parse, data, cancellable=True, limiter=self.parsers)
        except TimeoutError:
            raise NoParser(f"not read within {PARSE_SECONDS:g} s") from None
        except (BrokenWorkerProcess, OSError) as exc:
            raise NoParser(f"no worker process ({exc or type(exc).__name__})") from None

    def _refused(self, envelope: Envelope, exc: Exception, reply: str) -> str:
        log.info("inbound: refused a message from %.100r: %s", envelope.mail_from, exc)
        self.counted.labels("refused").inc()
        return reply


_END = b"\r\n.\r\n"
CHUNK = 256 * 1024


class _ChunkedData(SMTP):
    """aiosmtpd's DATA, reading the message in chunks of up to CHUNK bytes rather than line by line:
    its own reader spends microseconds of this event loop on every line, seconds on a message of
    millions of short ones. The same replies (552 past data_size_limit, read to its end all the
    same); lines are not held to 1,000 characters. PIPELINING is not offered, so the client waits
    for the reply after its final dot and nothing it sends after it is read here."""

    async def smtp_DATA(self, arg: str) -> None:
        if await self.check_helo_needed() or await self.check_auth_needed("DATA"):
            return
        envelope = self.envelope
        assert envelope is not None  # as in aiosmtpd's own DATA: a session past HELO has one
        if not envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        if arg:
            await self.push("501 Syntax: DATA")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        held = bytearray(b"\r\n")  # the DATA line's end: a message may be the lone dot alone
        searched, too_much, limit = 0, False, self.data_size_limit
        while (end := held.find(_END, searched)) < 0:
            if too_much or (limit and len(held) > limit + len(_END)):  # keep only what may hold the end
                too_much, held = True, held[-len(_END) + 1 :]
            searched = max(0, len(held) - len(_END) + 1)
            if not (chunk := await self._reader.read(CHUNK)):  # the connection is gone
                return
            held += chunk
        if too_much or (limit and end > limit):
            self._set_post_data_state()
            await self.push("552 Error: Too much mail data")
            return
        content = bytes(held[: end + 2]).replace(b"\r\n.", b"\r\n")[2:]  # undo dot-stuffing
        envelope.content = envelope.original_content = content
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
        await self.push("250 OK" if status is MISSING else status)


class _SMTP(_ChunkedData, SMTP):
    pass


class _LMTP(_ChunkedData, LMTP):
    pass


class _Busy(asyncio.Protocol):
    """A connection past MAX_SESSIONS: told to come back later (a relay retries a 421), then closed."""

    # a stream protocol is always given a Transport, narrower than BaseProtocol says
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        transport.write(b"421 4.3.2 too many connections, try again later\r\n")
        transport.close()


class InboundActor:
    def __init__(self, config: InboundConfig, pool: asyncpg.Pool, metrics: Metrics, sock: socket.socket) -> None:
        self.handler = Handler(config, pool, metrics)
        self.config, self.sock = config, sock

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        loop = asyncio.get_running_loop()
        protocol = _LMTP if self.config.protocol == "lmtp" else _SMTP
        sessions: list[SMTP] = []
        busy_logged = [-BUSY_LOG_SECONDS]

        def factory() -> asyncio.Protocol:
            # live: not yet connected (no session yet), or connected and not yet lost (aiosmtpd drops its transport)
            sessions[:] = [s for s in sessions if s.session is None or s.transport is not None]
            if len(sessions) >= MAX_SESSIONS:
                self.handler.counted.labels("busy").inc()
                if (now := time.monotonic()) - busy_logged[0] >= BUSY_LOG_SECONDS:
                    log.warning("inbound: connections answered 421: %d sessions already", len(sessions))
                    busy_logged[0] = now
                return _Busy()
            session = protocol(
                self.handler,
                hostname="einmal-inbound",
                ident="einmal",
                loop=loop,
                data_size_limit=self.config.max_bytes,
                timeout=self.config.timeout_seconds,
            )
            sessions.append(session)
            return session

        server = await loop.create_server(factory, sock=self.sock.dup())
        try:
            host, port = self.sock.getsockname()[:2]
            log.info("taking bounces over %s on %s:%d", self.config.protocol.upper(), host, port)
            task_status.started()
            await anyio.sleep_forever()
        finally:
            server.close()
            for session in sessions:
                if session.transport is not None:
                    session.transport.close()
