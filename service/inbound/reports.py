"""One inbound message read into reports: a bounce of any format, a complaint, or nothing.

``parse(data)`` answers a tuple of Reports, one for each recipient the message names:

- a bounce (service/inbound/formats: DSN fields, else the notice of a server that writes none):
  ``kind`` hard (a permanent failure), soft (delayed, or a 4.x.x), or unclassified (a bounce that
  says neither what failed nor why); ``reason`` from service/smtp/reasons.py, which also says
  what the report does to the address (suppress, count toward the soft limit, nothing);
- a complaint: an ARF report with ``Feedback-Type: abuse``, or a provider's complaint form;
- ``()``: anything else (auto-replies, other feedback types, DSNs of success): ignored.

It raises ``Malformed`` only for what cannot be read at all (a multipart message without its
boundary), ``TooLarge`` past MAX_PARTS or MAX_RECIPIENTS, counted by ``bounded(data)`` before
anything is parsed, and nothing else. The email package is pure Python: the listener runs
``parse`` in a worker process (actors/inbound_smtp.py).

Each report has a stable event id: ``dsn:`` (``arf:`` for complaints) and the message's own
Message-ID, or ``sha256:<hash of the message>`` when it has none; when it names several
recipients, each one's id ends in ``:<its address>``.
"""

import email
import hashlib
import re
from dataclasses import dataclass, field, replace
from email import errors, policy
from email.message import Message
from typing import TypeGuard

from service.addresses import email_key
from service.inbound.formats import ADDRESS, Finding, arf, dsn, text
from service.smtp import reasons

MAX_ID = 250
# A DSN or an ARF report has three or four MIME parts, a returned message a few more; a DSN about one
# message of einmal's (one recipient each) names one recipient, a few when an alias expanded.
MAX_PARTS = 500  # counted as lines beginning with "--": each part follows one
MAX_RECIPIENTS = 100  # counted as lines beginning with "Action:": each recipient block has one
_REPLY = re.compile(r"(?:^|\s)([2-5])\d\d[ -]")
_UNREADABLE = (errors.NoBoundaryInMultipartDefect, errors.StartBoundaryNotFoundDefect)


class Malformed(Exception):
    """A message that cannot be read at all; the listener refuses it."""


class TooLarge(Malformed):
    """A report past MAX_PARTS or MAX_RECIPIENTS, refused unread."""


@dataclass(frozen=True)
class Report:
    kind: str  # hard | soft | complaint | unclassified
    status: str  # 5.1.1, 550, 4.2.2, abuse; "" when the report gives none
    recipient: str | None  # the address the report names (Original-Recipient before Final-Recipient)
    original: tuple[int, int] | None  # (campaign, subscriber) a webhook's provider named; parse: None
    event_id: str
    returned_senders: tuple[str, ...] = ()  # the returned message's envelope sender, as the report quotes it
    reason: str | None = None  # reasons.REASONS; None: a provider's verdict, its kind decides (``effect``)
    also: tuple[str, ...] = ()  # the recipient's other address in the report (Final-Recipient of an alias)
    diagnostic: str = field(default="", compare=False)  # what the server said, for the log
    guessed: bool = False  # the recipient is only the returned message's To: kept when the token's row agrees

    def effect(self) -> str:
        """reasons.SUPPRESS, COUNT or NONE. A provider's verdict without a reason is classified from its
        enhanced status code when it gives one, else taken as it is (hard and complaint suppress)."""
        reason = self.reason
        if reason is None and reasons.status_in(self.status or "") and "." in self.status:
            reason = reasons.classify(self.status)
        if reason is None:
            return {"hard": reasons.SUPPRESS, "complaint": reasons.SUPPRESS, "soft": reasons.COUNT}.get(
                self.kind, reasons.NONE
            )
        return reasons.effect(self.kind, reason)

    def recorded_reason(self) -> str | None:
        if self.reason is not None or self.kind == "complaint":
            return self.reason or "complaint"
        return reasons.classify(self.status) if "." in (self.status or "") else None


def bounded(data: bytes) -> None:
    """TooLarge when `data` holds more MIME parts or recipient blocks than a report may: lines counted
    in C, a few milliseconds for the largest message the listener takes, before anything is parsed.
    A line begins after whichever line ending the email package splits on (CR LF, LF or CR)."""
    if data.startswith(b"--") + data.count(b"\n--") + data.count(b"\r--") > MAX_PARTS:
        raise TooLarge(f"more than {MAX_PARTS} MIME parts")
    lowered = data.lower()  # a field's name is matched in any case
    if lowered.count(b"\naction:") + lowered.count(b"\raction:") > MAX_RECIPIENTS:
        raise TooLarge(f"more than {MAX_RECIPIENTS} recipients")


def _text(value: object) -> str:
    return "" if value is None else str(value).strip()


def _event_id(message: Message, data: bytes, source: str) -> str:
    own = _text(message.get("Message-ID"))
    if own and len(own) <= MAX_ID and own.isascii() and own.isprintable():
        return f"{source}:{own}"
    return f"{source}:sha256:{hashlib.sha256(data).hexdigest()}"


def returned_senders(message: Message, quoted: tuple[str | None, ...] = ()) -> tuple[str, ...]:
    """The envelope sender of the message a report returns, as the report quotes it: `quoted` (ARF's
    Original-Mail-From, X-Postfix-Sender), the Return-Path of the returned message or headers. Only a
    VERP token in one of them that verifies means anything: anyone can write these fields."""
    found = [_text(sender) for sender in quoted if sender]
    for part in message.walk():
        kind = part.get_content_type()
        payload = part.get_payload()
        if kind == "message/rfc822" and isinstance(payload, list) and payload:
            assert isinstance(payload[0], Message)  # a message/rfc822 part holds one Message
            found.append(_text(payload[0].get("Return-Path")))
        elif kind in ("text/rfc822-headers", "message/rfc822-headers"):
            raw = part.get_payload(decode=True)  # bytes, or None
            head = re.split(rb"\r?\n\r?\n", raw if isinstance(raw, bytes) else b"", maxsplit=1)[0]  # no body
            headers = email.message_from_bytes(head, policy=policy.compat32)
            found.append(_text(headers.get("Return-Path")))
    return tuple(dict.fromkeys(sender.strip("<>") for sender in found[:4] if 0 < len(sender) <= 320))


def _report(
    finding: Finding, event_id: str, senders: tuple[str, ...], ours: frozenset[str] = frozenset(), guessed: bool = False
) -> Report:
    reason = reasons.classify(finding.status, finding.diagnostic)
    if reason in (*reasons.ADDRESS, "unclassified") and _names(finding.diagnostic, ours):
        reason = "sender"  # the server refused our return path, not the recipient
    elif reason in reasons.ADDRESS and _names_another(finding):
        reason = "routing"  # the server's words are about another address (a forward, an alias), not this one
    if finding.gave_up and reason in ("routing", "unclassified"):
        reason = "expired"
    if finding.permanent is None:
        kind = "unclassified"
    else:
        kind = "hard" if finding.permanent else "soft"
    return Report(
        kind,
        finding.status or "",
        finding.recipient,
        None,
        event_id,
        senders,
        reason,
        finding.also,
        finding.diagnostic[:300],
        guessed,
    )


def _names(diagnostic: str, ours: frozenset[str]) -> bool:
    """The diagnostic quotes one of our addresses in a refusal: after a 4xx or 5xx reply code, not in a
    command the transcript echoes (``MAIL From:<…>``) or an accepting ``250``."""
    lowered = diagnostic.lower()
    for address in ours:
        at = lowered.find(address)
        while at >= 0:
            if _refusing(lowered, at):
                return True
            at = lowered.find(address, at + 1)
    return False


def _names_another(finding: Finding) -> bool:
    """The diagnostic's refusal quotes addresses (after a 4xx or 5xx code), none of them the recipient's."""
    lowered = finding.diagnostic.lower()
    mine = {a.lower() for a in (finding.recipient, *finding.also) if a}
    quoted = {m[0].strip(".").lower() for m in ADDRESS.finditer(lowered) if _refusing(lowered, m.start())}
    return bool(quoted) and not quoted & mine


def _refusing(lowered: str, at: int) -> bool:
    """The last reply code in the 120 characters before `at` is a 4xx or 5xx: what stands at `at` is in a
    refusal's words, not in an echoed command or an accepting 250."""
    code = _REPLY.findall(lowered[max(0, at - 120) : at])
    return bool(code) and code[-1] in "45"


def _ours(message: Message, senders: tuple[str, ...]) -> frozenset[str]:
    """Our own addresses in a bounce: the return path it was sent to and the returned message's sender."""
    found = {
        a.lower()
        for name in ("To", "Delivered-To", "X-Original-To")
        for a in ADDRESS.findall(str(message.get(name) or ""))
    }
    return frozenset(found | {s.lower() for s in senders if "@" in s})


def _with_notice(message: Message, found: list[Finding]) -> list[Finding]:
    """DSN findings with what the notice beside the fields says of each recipient, when the fields alone
    would name an address reason or none: where the server refused (Exim's "after MAIL FROM", Postfix's
    "in reply to MAIL FROM command"), and Exim's "retry timeout exceeded" after a temporary failure."""
    notice: str | None = None
    out = []
    for f in found:
        if reasons.classify(f.status, f.diagnostic) not in (*reasons.ADDRESS, "unclassified"):
            out.append(f)
            continue
        notice = text.notice(message) if notice is None else notice
        said = text.said_of(notice, f.recipient)
        if not said:
            out.append(f)
            continue
        gave_up = bool(
            f.permanent
            and text.GAVE_UP.search(said) is not None
            and (f.status is None or f.status.endswith(".0.0") or f.status.startswith("4"))
        )
        out.append(
            replace(
                f,
                diagnostic=f"{f.diagnostic} {said}".strip()[:2000],
                permanent=False if gave_up else f.permanent,
                gave_up=f.gave_up or gave_up,
            )
        )
    return out


def _bounce(message: Message, data: bytes) -> tuple[Report, ...]:
    found = dsn.read(message)
    if found:
        found = _with_notice(message, found)
    elif found is None or not _delivered(message):
        found = text.read(message)
        if found is None:
            return ()
    event_id = _event_id(message, data, "dsn")
    senders = returned_senders(message, (dsn.postfix_sender(message),))
    ours = _ours(message, senders)
    if len(found) == 1:
        guessed = (
            found[0].recipient is None and (to := text.returned_to(message)) is not None and to.lower() not in ours
        )
        finding = replace(found[0], recipient=to) if guessed else found[0]
        return (_report(finding, event_id, senders, ours, guessed),)
    # several recipients: one event each, named by its address (or its place, when it names none)
    return tuple(
        _report(f, f"{event_id}:{email_key(f.recipient) if _keyable(f.recipient) else n}", senders, ours)
        for n, f in enumerate(found, 1)
    )


def _delivered(message: Message) -> bool:
    """A delivery status naming outcomes that are no failures (delivered, relayed, expanded)."""
    return any(
        group.get("action")
        for part in message.walk()
        if part.get_content_type() in dsn.TYPES
        for group in dsn.recipients(dsn.part_text(part))
    )


def _keyable(address: str | None) -> TypeGuard[str]:
    try:
        return address is not None and bool(email_key(address))
    except ValueError:
        return False


def parse(data: bytes) -> tuple[Report, ...]:
    """The reports in one inbound message, () for mail that is not one; Malformed when unreadable
    (TooLarge past the bounds). Seconds for millions of lines: call it off the event loop."""
    bounded(data)
    try:
        message = email.message_from_bytes(data, policy=policy.compat32)
        if message.get_content_maintype() == "multipart" and any(isinstance(d, _UNREADABLE) for d in message.defects):
            raise Malformed(f"broken MIME: {type(message.defects[0]).__name__}")
        fields = arf.feedback(message)
        if fields is not None:
            if fields.get("feedback-type", "").lower() != "abuse":
                return ()
            return (
                Report(
                    "complaint",
                    "abuse",
                    None,
                    None,
                    _event_id(message, data, "arf"),
                    returned_senders(message, (fields.get("original-mail-from"),)),
                    "complaint",
                ),
            )
        return _bounce(message, data)
    except Malformed:
        raise
    except Exception as exc:  # the email package's failures on hostile input are not documented
        raise Malformed(f"unreadable ({type(exc).__name__})") from None
