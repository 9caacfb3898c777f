"""Inbound SMTP (or LMTP): bounces and complaints come back, as one actor under the node's supervisor.

With EINMAL_INBOUND_SMTP_ADDRESS set the node listens there (aiosmtpd) for mail to the return
path: ``bounces@domain`` and ``bounces+<token>@domain`` (EINMAL_RETURN_PATH). Any other
recipient is refused with 550, a token that does not verify with 550 5.7.1, a second recipient
in one transaction with 452 (the client sends it again, alone), a message over
EINMAL_INBOUND_MAX_BYTES with 552; a connection idle for EINMAL_INBOUND_TIMEOUT_SECONDS is
closed. A message is then (service/bounces.py):

- a report einmal cannot read: 550 5.6.0, nothing written;
- not a report, or a report that names no send row (no token, no einmal Message-ID, no such
  row, another address): 250, one log line, nothing written (counted);
- a bounce or complaint: applied once through inbound.apply, then 250; a repeat: 250, nothing
  changes; the same report id with other content: 554; the database unreachable: 451 (the
  relay tries again later, so nothing is lost).

The socket is bound before the actors start and kept across restarts, like the HTTP actor's.
"""

import asyncio
import logging
import socket

import anyio
import asyncpg
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP, Envelope, Session
from anyio.abc import TaskStatus

from service import bounces, sockets
from service.errors import UsageError
from service.metrics import Metrics
from service.settings import Settings
from service.verp import ReturnPath

log = logging.getLogger("einmal.inbound")


def bind(address: str) -> socket.socket:
    """The listening socket for EINMAL_INBOUND_SMTP_ADDRESS (port 0: a free one)."""
    return sockets.bind(address, "EINMAL_INBOUND_SMTP_ADDRESS", backlog=128)


class Handler:
    """aiosmtpd's handler: checks recipients, reads and applies reports."""

    def __init__(self, settings: Settings, pool: asyncpg.Pool, metrics: Metrics) -> None:
        self.settings, self.pool = settings, pool
        self.path = ReturnPath.from_settings(settings)
        self.counted = metrics.inbound

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope, address: str,
                          rcpt_options: list[str]) -> str:
        ours, token = self.path.ours(address)
        if not ours:
            log.info("inbound: refused recipient %.100r: not the return path", address)
            self.counted.labels("refused").inc()
            return "550 5.1.1 mailbox unavailable: only the return path takes mail here"
        if token is not None and self.path.verify(token) is None:
            log.info("inbound: refused recipient %.100r: the VERP token does not verify", address)
            self.counted.labels("refused").inc()
            return "550 5.7.1 return path token not valid"
        if envelope.rcpt_tos:
            return "452 4.5.3 one recipient per message, please send this one again"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content or b""
        try:
            found = bounces.parse(data)
        except bounces.Malformed as exc:
            log.info("inbound: refused a message from %.100r: %s", envelope.mail_from, exc)
            self.counted.labels("refused").inc()
            return "550 5.6.0 not a readable report"
        if not found:
            log.info("inbound: ignored a message from %.100r: not a bounce or complaint report", envelope.mail_from)
            self.counted.labels("ignored").inc()
            return "250 2.0.0 OK, ignored"
        _, token = self.path.ours(envelope.rcpt_tos[0])
        row_ids = self.path.verify(token) if token else None
        # the token names one message's row; a DSN naming several recipients is matched by address
        by_token = row_ids is not None and len(found) == 1
        row_ids = row_ids or found[0].original
        if row_ids is None:
            return self._dropped(found[0], "no VERP token and no einmal Message-ID")
        results = []
        for report in found:  # each its own transaction: a retry repeats those already applied
            try:
                async with self.pool.acquire() as conn:
                    results.append(await bounces.record(conn, self.settings, report, row_ids, by_token))
            except UsageError as exc:  # the same report id with other content
                log.warning("inbound: refused %s: %s", report.event_id[:120], exc)
                self.counted.labels("refused").inc()
                return "554 5.6.0 report id already used for other content"
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.warning("inbound: %s not recorded, the relay will retry: %s", report.event_id[:120], exc)
                return "451 4.3.0 cannot record the report now, try again later"
        for report, result in zip(found, results, strict=True):
            if result.startswith("dropped"):
                self._dropped(report, result.removeprefix("dropped: "))
                continue
            where = f"campaign {row_ids[0]} subscriber {row_ids[1]}" if by_token or len(found) == 1 \
                else f"a recipient of campaign {row_ids[0]}"
            log.info("inbound: %s %s (%s) for %s: %s", report.kind, report.event_id[:120], report.status, where, result)
            self.counted.labels(result).inc()
        return "250 2.0.0 OK, dropped" if all(r.startswith("dropped") for r in results) else "250 2.0.0 OK"

    def _dropped(self, report: bounces.Report, why: str) -> str:
        log.info("inbound: dropped %s %s: %s", report.kind, report.event_id[:120], why)
        self.counted.labels("dropped").inc()
        return "250 2.0.0 OK, dropped"


class InboundActor:
    def __init__(self, settings: Settings, pool: asyncpg.Pool, metrics: Metrics, sock: socket.socket) -> None:
        self.handler = Handler(settings, pool, metrics)
        self.settings, self.sock = settings, sock

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        loop = asyncio.get_running_loop()
        protocol = LMTP if self.settings.inbound_protocol == "lmtp" else SMTP
        sessions: list[SMTP] = []

        def factory() -> SMTP:
            session = protocol(self.handler, hostname="einmal-inbound", ident="einmal", loop=loop,
                               data_size_limit=self.settings.inbound_max_bytes,
                               timeout=self.settings.inbound_timeout_seconds)
            sessions[:] = [s for s in sessions if s.transport is not None and not s.transport.is_closing()]
            sessions.append(session)
            return session

        server = await loop.create_server(factory, sock=self.sock.dup())
        try:
            host, port = self.sock.getsockname()[:2]
            log.info("taking bounces over %s on %s:%d", self.settings.inbound_protocol.upper(), host, port)
            task_status.started()
            await anyio.sleep_forever()
        finally:
            server.close()
            for session in sessions:
                if session.transport is not None:
                    session.transport.close()
