"""One persistent SMTP connection, reused for many messages.

Every outcome of `send()` is classified by where the transaction stopped, because
that decides whether the message may have been accepted (docs/design.md#promises, #in-doubt-bound):

    SENT        2xx after the end of DATA
    TRANSIENT   4xx on MAIL, RCPT, DATA or end of DATA; or the connection was lost,
                reset or timed out before the terminating ".\\r\\n" was handed to the socket
    PERMANENT   5xx on MAIL, RCPT, DATA or end of DATA (the reply is kept)
    IN_DOUBT    the connection was lost, reset or timed out after the terminating dot
                was written and before its reply arrived

To make the TRANSIENT / IN_DOUBT line exact, the dot-stuffed body is written and
drained first, and the final dot line is a separate write; everything that fails
before that write cannot have been accepted. Connect, EHLO, STARTTLS and AUTH
failures raise SmtpUnavailable: nothing was sent at all.

When the server offers PIPELINING (RFC 2920), MAIL, RCPT and DATA go out in one
write and their three replies are read in order: two round trips per message, not
four. A refused MAIL or RCPT is classified by its own reply; the DATA behind it is
answered 503/554, read and ignored before the RSET (a 354 there, from a broken
server, closes the connection: no body, no dot). Without PIPELINING the commands go
one at a time. Either way one message at most is in flight per connection.

aiosmtplib opens the connection (connect, EHLO, STARTTLS, AUTH); then the transport
is handed to Wire, which queues every reply as it arrives. aiosmtplib's own protocol
keeps only a reply that a read is already waiting for: it would drop the second and
third replies of a pipelined write.
"""

import asyncio
import enum
import os
import re
import ssl
from dataclasses import dataclass
from typing import cast

from aiosmtplib import (
    SMTP,
    SMTPAuthenticationError,
    SMTPException,
    SMTPResponse,
    SMTPResponseException,
    SMTPServerDisconnected,
)
from aiosmtplib.email import quote_address

from service.addresses import ascii_address
from service.errors import EinmalError
from service.relays import Relay, Relaying
from service.smtp.wire import Wire, one_line

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-"
# A plain dot-atom address: quote_address() would return it unchanged in <>, at a tenth of the cost.
_PLAIN = re.compile(rf"[{_ATEXT}]+(?:\.[{_ATEXT}]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*")
_NETWORK_ERRORS = (SMTPException, OSError, TimeoutError)  # ssl.SSLError is an OSError
ONE_WRITE = 16 * 1024  # a stuffed body up to this size goes out with its final dot in one write


class Outcome(enum.Enum):
    SENT = "sent"
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    IN_DOUBT = "in_doubt"


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    reply: str  # "250 2.0.0 Ok: queued", "550 5.1.1 no such user", "connection lost before …"


class SmtpUnavailable(EinmalError):
    """Connect, EHLO, STARTTLS or AUTH failed: nothing was sent."""


def dot_stuff(message: bytes) -> bytes:
    """DATA payload without the final dot line: CRLF-terminated, lines starting with "." doubled."""
    if not message.endswith(b"\r\n"):
        message += b"\r\n"
    stuffed = message.replace(b"\r\n.", b"\r\n..")
    return b"." + stuffed if stuffed.startswith(b".") else stuffed


def _quote(address: str) -> str:
    return f"<{address}>" if _PLAIN.fullmatch(address) else quote_address(address)


def _reply(response: SMTPResponse) -> str:
    return one_line(f"{response.code} {response.message}")


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g}s"
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno:  # "connection refused", not the host and port again
        return os.strerror(cause.errno).lower()
    return one_line(str(exc)) or type(exc).__name__


class SmtpConnection:
    def __init__(self, relaying: Relaying, relay: Relay | None = None):
        """A connection to `relay`, else to the first of the environment's relays."""
        self.relay = relay = relay or relaying.relays[0]
        self._timeout = relaying.timeout
        self._where = f"SMTP {relay.name}"
        self._smtp = SMTP(
            hostname=relay.host,
            port=relay.port,
            timeout=self._timeout,
            use_tls=relay.tls == "tls",
            start_tls=False,  # done by hand below, so that "required but not offered" fails
            cert_bundle=relay.ca_file,
        )
        self._wire: Wire | None = None
        self._pipelining = self._utf8 = self._8bitmime = False  # what the server offers
        self._sender: tuple[str, str] = ("", "<>")  # the last envelope sender and its quoted form
        self._lock = asyncio.Lock()
        self._fresh = False  # connected for the current send (a stale pooled connection is retried)

    @property
    def pipelining(self) -> bool:
        """Whether the open connection pipelines MAIL, RCPT and DATA."""
        return self._wire is not None and self._pipelining

    async def send(self, envelope_from: str, recipient: str, message: bytes) -> Result:
        async with self._lock:
            try:
                if self._wire is None or not self._wire.idle:
                    self._drop()
                    await self._connect()
                result, lost_at_mail = await self._transaction(envelope_from, recipient, message)
                if lost_at_mail and not self._fresh:
                    # The server closed an idle connection: MAIL never started a transaction.
                    await self._connect()
                    result, _ = await self._transaction(envelope_from, recipient, message)
                return result
            except BaseException:  # cancelled or a bug: where it stopped is unknown, never reuse it
                self._drop()
                raise
            finally:
                self._fresh = False

    async def close(self) -> None:
        async with self._lock:
            wire = self._wire
            if wire is not None and wire.idle:
                try:
                    wire.write(b"QUIT\r\n")
                    await wire.read(min(self._timeout, 5.0))
                except _NETWORK_ERRORS:
                    pass
            self._drop()

    def _drop(self) -> None:
        """Close the connection, if any: the next send opens a new one."""
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        self._smtp.close()  # resets aiosmtplib's state (the transport is closed already)

    async def _connect(self) -> None:
        smtp, relay = self._smtp, self.relay
        stage = "connect"
        try:
            await smtp.connect()
            stage = "EHLO"
            await smtp.ehlo()
            if relay.tls == "starttls":
                stage = "STARTTLS"
                if not smtp.supports_extension("starttls"):
                    raise SmtpUnavailable(f"{self._where}: STARTTLS required but not offered by the server")
                await smtp.starttls()
                stage = "EHLO after STARTTLS"
                await smtp.ehlo()
            if relay.username is not None:
                stage = "AUTH"
                await smtp.login(relay.username, relay.password or "")
            if smtp.transport is None or smtp.transport.is_closing():
                raise SMTPServerDisconnected("Connection lost")
        except SmtpUnavailable:
            smtp.close()
            raise
        except SMTPAuthenticationError as exc:
            smtp.close()
            reply = one_line(f"{exc.code} {exc.message}")
            raise SmtpUnavailable(f"{self._where}: authentication rejected: {reply}") from None
        except SMTPResponseException as exc:
            smtp.close()
            reply = one_line(f"{exc.code} {exc.message}")
            raise SmtpUnavailable(f"{self._where}: {stage} refused: {reply}") from None
        except (*_NETWORK_ERRORS, ssl.SSLError) as exc:
            smtp.close()
            raise SmtpUnavailable(f"{self._where}: {stage} failed: {_describe(exc, self._timeout)}") from None
        self._pipelining = smtp.supports_extension("pipelining")
        self._utf8 = smtp.supports_extension("smtputf8")
        self._8bitmime = smtp.supports_extension("8bitmime")
        # aiosmtplib types its transport as the base class; on a stream it is an asyncio.Transport
        self._wire = Wire(cast(asyncio.Transport, smtp.transport), self._timeout)
        self._fresh = True

    async def _transaction(self, sender: str, recipient: str, message: bytes) -> tuple[Result, bool]:
        """Returns the result, and whether the connection was lost at MAIL (safe to retry)."""
        envelope = self._envelope(sender, recipient, message)
        if isinstance(envelope, str):
            return Result(Outcome.PERMANENT, envelope), False
        mail, rcpt = envelope
        wire = self._wire
        assert wire is not None  # send() connected first
        stage = "MAIL"
        try:
            if self._pipelining:
                wire.write(mail + rcpt + b"DATA\r\n")
                response = await wire.read()
                if response.code != 250:
                    return await self._refused(response, unread=2), False
                stage = "RCPT"
                response = await wire.read()
                if response.code not in (250, 251):
                    return await self._refused(response, unread=1), False
                stage = "DATA"
                response = await wire.read()
            else:
                wire.write(mail)
                response = await wire.read()
                if response.code != 250:
                    return await self._refused(response), False
                stage = "RCPT"
                wire.write(rcpt)
                response = await wire.read()
                if response.code not in (250, 251):
                    return await self._refused(response), False
                stage = "DATA"
                wire.write(b"DATA\r\n")
                response = await wire.read()
            if response.code != 354:
                return await self._refused(response), False
            body = dot_stuff(message)
            if len(body) <= ONE_WRITE and not wire.transport.get_write_buffer_size():
                # far below the transport's high-water mark: the path below would not pause at its
                # drain, so nothing could be seen between its two writes; one write is the same
                wire.write(body + b".\r\n")
            else:
                wire.write(body)
                await wire.drain()
                # From here on the server may have accepted the message; the reply is queued by the
                # wire whenever it comes, and nothing is awaited before the read anyway.
                wire.write(b".\r\n")
        except _NETWORK_ERRORS as exc:
            self._drop()
            reason = f"connection lost before end of DATA ({stage}): {_describe(exc, self._timeout)}"
            return Result(Outcome.TRANSIENT, reason), stage == "MAIL" and isinstance(exc, ConnectionError)
        try:
            response = await wire.read()
        except _NETWORK_ERRORS as exc:
            self._drop()
            reason = f"connection lost after end of DATA, reply unknown: {_describe(exc, self._timeout)}"
            return Result(Outcome.IN_DOUBT, reason), False
        if 200 <= response.code < 300:
            return Result(Outcome.SENT, _reply(response)), False
        if 400 <= response.code < 600:
            return await self._refused(response), False
        self._drop()
        return Result(Outcome.IN_DOUBT, f"unexpected reply to end of DATA: {_reply(response)}"), False

    def _envelope(self, sender: str, recipient: str, message: bytes) -> tuple[bytes, bytes] | str:
        """The MAIL and RCPT command lines, or why the addresses cannot be sent (PERMANENT)."""
        for address in (sender, recipient):
            if _CONTROL.search(address):
                return f"address contains a control character: {address!r}"
        if not self._utf8 and not (sender.isascii() and recipient.isascii()):
            try:  # without SMTPUTF8 an ASCII local part still goes, with its domain as an A-label
                sender, recipient = ascii_address(sender), ascii_address(recipient)
            except ValueError as exc:
                return f"{exc}, which the server does not offer" if "SMTPUTF8" in str(exc) else str(exc)
        utf8 = not (sender.isascii() and recipient.isascii())
        try:
            if self._sender[0] != sender:
                self._sender = (sender, _quote(sender))
            quoted = _quote(recipient)
        except ValueError as exc:
            return one_line(str(exc))
        encoding = "utf-8" if utf8 else "ascii"
        mail = b"MAIL FROM:" + self._sender[1].encode(encoding)
        if utf8:
            mail += b" SMTPUTF8"
        if self._8bitmime and not message.isascii():
            mail += b" BODY=8BITMIME"
        return mail + b"\r\n", b"RCPT TO:" + quoted.encode(encoding) + b"\r\n"

    async def _refused(self, response: SMTPResponse, unread: int = 0) -> Result:
        """A 4xx/5xx (or unexpected) reply on a live connection: RSET so it can be reused. `unread`:
        replies still due to commands pipelined behind the refused one (503/554 to DATA, ignored)."""
        if 500 <= response.code < 600:
            result = Result(Outcome.PERMANENT, _reply(response))
        else:
            result = Result(Outcome.TRANSIENT, _reply(response))
        if response.code == 421 or not 400 <= response.code < 600:
            self._drop()
            return result
        wire = self._wire
        assert wire is not None  # a reply on a live connection
        try:
            for _ in range(unread):
                if (await wire.read()).code == 354:  # DATA accepted all the same: only closing ends it
                    self._drop()
                    return result
            wire.write(b"RSET\r\n")
            if (await wire.read()).code != 250:
                self._drop()
        except _NETWORK_ERRORS:
            self._drop()
        return result
