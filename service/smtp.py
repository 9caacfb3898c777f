"""One persistent SMTP connection, reused for many messages.

Every outcome of `send()` is classified by where the transaction stopped, because
that decides whether the message may have been accepted (DESIGN.md §1, §2):

    SENT        2xx after the end of DATA
    TRANSIENT   4xx on MAIL, RCPT, DATA or end of DATA; or the connection was lost,
                reset or timed out before the terminating ".\\r\\n" was handed to the socket
    PERMANENT   5xx on MAIL, RCPT, DATA or end of DATA (the reply is kept)
    IN_DOUBT    the connection was lost, reset or timed out after the terminating dot
                was written and before its reply arrived

To make the TRANSIENT / IN_DOUBT line exact, DATA is not sent with aiosmtplib's
data(): the dot-stuffed body is written and drained first, and the final dot line
is a separate write; everything that fails before that write cannot have been
accepted. Connect, EHLO, STARTTLS and AUTH failures raise SmtpUnavailable: nothing
was sent at all.
"""

import asyncio
import enum
import os
import re
import ssl
from dataclasses import dataclass

from aiosmtplib import (
    SMTP,
    SMTPAuthenticationError,
    SMTPException,
    SMTPResponse,
    SMTPResponseException,
    SMTPServerDisconnected,
)
from aiosmtplib.email import quote_address

from service.errors import EinmalError
from service.settings import Settings

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NETWORK_ERRORS = (SMTPException, OSError, TimeoutError)  # ssl.SSLError is an OSError


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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _reply(response: SMTPResponse) -> str:
    return _one_line(f"{response.code} {response.message}")


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g}s"
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno:  # "connection refused", not the host and port again
        return os.strerror(cause.errno).lower()
    return _one_line(str(exc)) or type(exc).__name__


class SmtpConnection:
    def __init__(self, settings: Settings):
        self._settings = settings
        self._timeout = settings.smtp_timeout_seconds
        self._where = f"SMTP {settings.smtp_host}:{settings.smtp_port}"
        self._smtp = SMTP(
            hostname=settings.smtp_host,
            port=settings.smtp_port,
            timeout=self._timeout,
            use_tls=settings.smtp_tls == "tls",
            start_tls=False,  # done by hand below, so that "required but not offered" fails
            cert_bundle=settings.smtp_tls_ca_file,
        )
        self._lock = asyncio.Lock()
        self._fresh = False  # connected for the current send (a stale pooled connection is retried)

    async def send(self, envelope_from: str, recipient: str, message: bytes) -> Result:
        async with self._lock:
            try:
                if not self._smtp.is_connected:
                    await self._connect()
                result, lost_at_mail = await self._transaction(envelope_from, recipient, message)
                if lost_at_mail and not self._fresh:
                    # The server closed an idle connection: MAIL never started a transaction.
                    await self._connect()
                    result, _ = await self._transaction(envelope_from, recipient, message)
                return result
            except BaseException:  # cancelled or a bug: where it stopped is unknown, never reuse it
                self._smtp.close()
                raise
            finally:
                self._fresh = False

    async def close(self) -> None:
        async with self._lock:
            if self._smtp.is_connected:
                try:
                    await self._smtp.quit(timeout=min(self._timeout, 5.0))
                except _NETWORK_ERRORS:
                    pass
            self._smtp.close()

    async def _connect(self) -> None:
        smtp, settings = self._smtp, self._settings
        stage = "connect"
        try:
            await smtp.connect()
            stage = "EHLO"
            await smtp.ehlo()
            if settings.smtp_tls == "starttls":
                stage = "STARTTLS"
                if not smtp.supports_extension("starttls"):
                    raise SmtpUnavailable(f"{self._where}: STARTTLS required but not offered by the server")
                await smtp.starttls()
                stage = "EHLO after STARTTLS"
                await smtp.ehlo()
            if settings.smtp_username is not None:
                stage = "AUTH"
                password = settings.smtp_password.get_secret_value() if settings.smtp_password else ""
                await smtp.login(settings.smtp_username, password)
        except SmtpUnavailable:
            smtp.close()
            raise
        except SMTPAuthenticationError as exc:
            smtp.close()
            reply = _one_line(f"{exc.code} {exc.message}")
            raise SmtpUnavailable(f"{self._where}: authentication rejected: {reply}") from None
        except SMTPResponseException as exc:
            smtp.close()
            reply = _one_line(f"{exc.code} {exc.message}")
            raise SmtpUnavailable(f"{self._where}: {stage} refused: {reply}") from None
        except (*_NETWORK_ERRORS, ssl.SSLError) as exc:
            smtp.close()
            raise SmtpUnavailable(f"{self._where}: {stage} failed: {_describe(exc, self._timeout)}") from None
        self._fresh = True

    async def _transaction(self, sender: str, recipient: str, message: bytes) -> tuple[Result, bool]:
        """Returns the result, and whether the connection was lost at MAIL (safe to retry)."""
        smtp, timeout = self._smtp, self._timeout
        bad = self._bad_addresses(sender, recipient)
        if bad:
            return Result(Outcome.PERMANENT, bad), False
        utf8 = not (sender + recipient).isascii()
        options = [b"SMTPUTF8"] if utf8 else []
        if not message.isascii() and smtp.supports_extension("8bitmime"):
            options.append(b"BODY=8BITMIME")
        encoding = "utf-8" if utf8 else "ascii"
        stage = "MAIL"
        try:
            from_arg = b"FROM:" + quote_address(sender).encode(encoding)
            response = await smtp.execute_command(b"MAIL", from_arg, *options, timeout=timeout)
            if response.code != 250:
                return await self._refused(response), False
            stage = "RCPT"
            to_arg = b"TO:" + quote_address(recipient).encode(encoding)
            response = await smtp.execute_command(b"RCPT", to_arg, timeout=timeout)
            if response.code not in (250, 251):
                return await self._refused(response), False
            stage = "DATA"
            response = await smtp.execute_command(b"DATA", timeout=timeout)
            if response.code != 354:
                return await self._refused(response), False
            protocol = smtp.protocol
            if protocol is None:
                raise SMTPServerDisconnected("Connection lost")
            protocol.write(dot_stuff(message))
            await asyncio.wait_for(protocol._drain_helper(), timeout)  # aiosmtplib's writer drain
            if not protocol.is_connected:
                raise SMTPServerDisconnected("Connection lost")
            # From here on the server may have accepted the message. No await may come between
            # this write and read_response(): aiosmtplib drops reply bytes that arrive while no
            # read is pending.
            protocol.write(b".\r\n")
        except _NETWORK_ERRORS as exc:
            smtp.close()
            reason = f"connection lost before end of DATA ({stage}): {_describe(exc, timeout)}"
            return Result(Outcome.TRANSIENT, reason), stage == "MAIL" and isinstance(exc, ConnectionError)
        try:
            response = await protocol.read_response(timeout=timeout)
        except _NETWORK_ERRORS as exc:
            smtp.close()
            reason = f"connection lost after end of DATA, reply unknown: {_describe(exc, timeout)}"
            return Result(Outcome.IN_DOUBT, reason), False
        if 200 <= response.code < 300:
            return Result(Outcome.SENT, _reply(response)), False
        if 400 <= response.code < 600:
            return await self._refused(response), False
        smtp.close()
        return Result(Outcome.IN_DOUBT, f"unexpected reply to end of DATA: {_reply(response)}"), False

    def _bad_addresses(self, sender: str, recipient: str) -> str | None:
        for address in (sender, recipient):
            if _CONTROL.search(address):
                return f"address contains a control character: {address!r}"
            if not address.isascii() and not self._smtp.supports_extension("smtputf8"):
                return f"address {address!r} needs SMTPUTF8, which the server does not offer"
        try:
            quote_address(sender), quote_address(recipient)
        except ValueError as exc:
            return _one_line(str(exc))
        return None

    async def _refused(self, response: SMTPResponse) -> Result:
        """A 4xx/5xx (or unexpected) reply on a live connection: RSET so it can be reused."""
        if 500 <= response.code < 600:
            outcome = Outcome.PERMANENT
        else:
            outcome = Outcome.TRANSIENT
        if response.code == 421 or not 400 <= response.code < 600:
            self._smtp.close()
        elif self._smtp.is_connected:
            try:
                reset = await self._smtp.execute_command(b"RSET", timeout=self._timeout)
                if reset.code != 250:
                    self._smtp.close()
            except _NETWORK_ERRORS:
                self._smtp.close()
        return Result(outcome, _reply(response))
