"""Bounces (RFC 3464 DSNs) and complaints (RFC 5965 ARF reports): parsed, tied to a send row, applied once.

``parse(data)`` reads one inbound message with the stdlib ``email`` package (compat32, which
keeps going on broken input and exposes a report's field blocks as header sets; flufl.bounce
only guesses addresses, and einmal needs the Action and Status fields). It answers a tuple of
reports, one for each recipient the report names:

- ``Report(kind="hard")``: a DSN recipient block with ``Action: failed`` and a ``5.x.x`` Status;
- ``Report(kind="soft")``: ``Action: delayed``, or failed with a ``4.x.x`` Status;
- ``Report(kind="complaint")``: an ARF report with ``Feedback-Type: abuse`` (one report);
- ``()``: anything else (auto-replies, other feedback types, delivered/relayed DSNs): ignored;
- ``Malformed``: a ``multipart/report`` einmal cannot read; ``TooLarge`` (a Malformed): more
  than MAX_PARTS MIME parts or MAX_RECIPIENTS recipient blocks, found by ``bounded(data)``
  counting lines before anything is parsed. It never raises anything else. The email package
  is pure Python: the listener runs ``parse`` in a worker process (actors/inbound_smtp.py).

Each report has a stable event id: ``dsn:`` (``arf:`` for complaints) and the report's own
Message-ID, or ``sha256:<hash of the message>`` when it has none, so a redelivered report is
the same event; when a DSN names several recipients, each one's id ends in ``:<its address>``.
``record`` puts the token's row in it (``dsn:C.S:<Message-ID>``): a report sent first to one's
own return path cannot take the id of another row's report.

What a report may change is decided apart from what it says (docs/design.md §8), so a parser
that reads more formats cannot widen it: over SMTP only the send row of the signed VERP token
(verified at RCPT, or, for mail to the plain return path such as a feedback loop's complaints,
found in the envelope sender the report quotes: ``returned_senders``) is touched, by one report
at most (``about``); ``apply`` acts only on a row whose message went out (WENT_OUT) and applies
the event through ``inbound.apply``: a hard bounce or a complaint suppresses the address (reason
``bounce`` or ``complaint``); a soft bounce is kept and suppresses once EINMAL_SOFT_BOUNCE_LIMIT
of them fell within EINMAL_SOFT_BOUNCE_DAYS. Every event applied leaves one einmal.bounces row.
Provider webhooks (service/inbound/webhooks.py), authenticated by the provider's signature, find their
rows with ``find_row`` or their own query and end in ``apply`` too.
"""

import email
import hashlib
import re
from dataclasses import dataclass, replace
from email import policy
from email.message import Message

import asyncpg

from service import db
from service.addresses import email_key
from service.inbound import events as inbound
from service.settings import Settings

_STATUS = re.compile(r"([245])\.\d{1,3}\.\d{1,3}")
MAX_ID = 250
# A DSN or an ARF report has three or four MIME parts, a returned message a few more; a DSN about one
# message of einmal's (one recipient each) names one recipient, a few when an alias expanded.
MAX_PARTS = 500  # counted as lines beginning with "--": each part follows one
MAX_RECIPIENTS = 100  # counted as lines beginning with "Action:": each recipient block has one
WENT_OUT = ("sent", "sending", "in_doubt")  # a report may be about these rows' messages only


class Malformed(Exception):
    """A report that cannot be read; the listener refuses it."""


class TooLarge(Malformed):
    """A report past MAX_PARTS or MAX_RECIPIENTS, refused unread."""


@dataclass(frozen=True)
class Report:
    kind: str  # hard | soft | complaint
    status: str  # 5.1.1, 4.2.2, abuse
    recipient: str | None  # the DSN's Final-Recipient (Original-Recipient) address, if it gives one
    original: tuple[int, int] | None  # (campaign, subscriber) a webhook's provider named; parse: None
    event_id: str
    returned_senders: tuple[str, ...] = ()  # the returned message's envelope sender, as the report quotes it


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


def _blocks(message: Message, content_type: str) -> list[Message]:
    for part in message.walk():
        if part.get_content_type() == content_type:
            payload = part.get_payload()
            if isinstance(payload, list) and all(isinstance(block, Message) for block in payload):
                return payload
            raise Malformed(f"its {content_type} part holds no fields")
    raise Malformed(f"a report without a {content_type} part")


def _returned_senders(message: Message, fields: Message | None = None) -> tuple[str, ...]:
    """The envelope sender of the message a report returns, as the report quotes it: ARF's
    Original-Mail-From (in `fields`), the Return-Path of the returned message or headers. Only a
    VERP token in one of them that verifies means anything: anyone can write these fields."""
    found = [_text(fields.get("Original-Mail-From"))] if fields is not None else []
    for part in message.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822" and isinstance(part.get_payload(), list) and part.get_payload():
            found.append(_text(part.get_payload()[0].get("Return-Path")))
        elif kind == "text/rfc822-headers":
            headers = email.message_from_bytes(part.get_payload(decode=True) or b"", policy=policy.compat32)
            found.append(_text(headers.get("Return-Path")))
    return tuple(dict.fromkeys(sender.strip("<>") for sender in found[:4] if 0 < len(sender) <= 320))


def _address(field: str) -> str | None:
    """``rfc822; a@example.com`` -> ``a@example.com``."""
    kind, _, address = field.partition(";")
    address = address.strip().strip("<>")
    return address if kind.strip().lower() == "rfc822" and "@" in address and len(address) <= 320 else None


def _dsn(message: Message, data: bytes) -> tuple[Report, ...]:
    recipients = [block for block in _blocks(message, "message/delivery-status")[1:] if block.get("Action")]
    if not recipients:  # the first block is per message; each after it is one recipient's
        raise Malformed("a delivery status without a recipient's Action")
    found: list[tuple[str, str, str | None]] = []
    for block in recipients:
        action = _text(block.get("Action")).lower()
        if action not in ("failed", "delayed"):
            continue
        status = _STATUS.match(_text(block.get("Status")))
        if status is None:
            raise Malformed(f"Action: {action} without a Status like 5.1.1")
        if action == "failed" and status[1] == "5":
            kind = "hard"
        elif action == "delayed" or status[1] == "4":
            kind = "soft"
        else:
            continue
        recipient = _address(_text(block.get("Final-Recipient"))) or _address(_text(block.get("Original-Recipient")))
        found.append((kind, status[0], recipient))
    event_id, sender = _event_id(message, data, "dsn"), _returned_senders(message)
    if len(found) == 1:
        return (Report(*found[0], None, event_id, sender),)
    # several recipients: one event each, named by its address (or its place, when it names none)
    return tuple(Report(kind, status, recipient, None, f"{event_id}:{email_key(recipient) if recipient else n}",
                        sender) for n, (kind, status, recipient) in enumerate(found, 1))


def _arf(message: Message, data: bytes) -> tuple[Report, ...]:
    blocks = _blocks(message, "message/feedback-report")
    if not blocks:
        raise Malformed("a feedback report without fields")
    feedback = _text(blocks[0].get("Feedback-Type")).lower()
    if feedback != "abuse":
        return ()
    return (Report("complaint", feedback, None, None, _event_id(message, data, "arf"),
                   _returned_senders(message, blocks[0])),)


def parse(data: bytes) -> tuple[Report, ...]:
    """The reports in one inbound message, () for mail that is not one; Malformed when unreadable
    (TooLarge past the bounds). Seconds for millions of lines: call it off the event loop."""
    bounded(data)
    try:
        message = email.message_from_bytes(data, policy=policy.compat32)
        if message.get_content_type() != "multipart/report":
            return ()
        if message.defects:
            raise Malformed(f"broken MIME: {type(message.defects[0]).__name__}")
        report_type = _text(message.get_param("report-type")).lower()
        if report_type == "delivery-status":
            return _dsn(message, data)
        if report_type == "feedback-report":
            return _arf(message, data)
        return ()
    except Malformed:
        raise
    except Exception as exc:  # the email package's failures on hostile input are not documented
        raise Malformed(f"unreadable ({type(exc).__name__})") from None


def about(found: tuple[Report, ...], email_lower: str) -> Report | None:
    """The one report of a message that may act on the send row its token names (address key
    `email_lower`): a message's only report, whatever recipient it names (relays rewrite them);
    of several, the first naming the row's own address; None when none does."""
    if len(found) == 1:
        return found[0]
    return next((r for r in found if r.recipient is not None and email_key(r.recipient) == email_lower), None)


async def find_row(conn: asyncpg.Connection, report: Report, row_ids: tuple[int, int],
                   by_token: bool) -> asyncpg.Record | str:
    """The send row a report is about, or why there is none.

    by_token: the row (campaign, subscriber) a verified VERP token named, whatever the report's
    recipient (pick the report with ``about``). Else, for a report its source authenticated (a
    provider's signed webhook) naming the message by its Message-ID: that row when the report's
    recipient is its address (or the report names none), else that campaign's row for the
    report's recipient."""
    row = await conn.fetchrow(db.query("bounce_send_row"), *row_ids)
    if row is None:
        return "no such send row"
    if by_token or report.recipient is None or email_key(report.recipient) == row["email_lower"]:
        return row
    other = await conn.fetchrow(db.query("bounce_send_row_address"), row_ids[0], email_key(report.recipient))
    return other if other is not None else "the report's recipient is not the address of the message it returns"


async def apply(conn: asyncpg.Connection, settings: Settings, report: Report, row: asyncpg.Record,
                payload: dict | None = None) -> str:
    """Apply the report to its send row once: applied, repeated, or ``dropped: why`` (nothing
    written) when the row's message never went out (WENT_OUT). `payload` is what identifies the
    event's content (default: its kind, status and row)."""
    status = await conn.fetchval(db.query("bounce_send_status"), row["id"])
    if status not in WENT_OUT:
        return f"dropped: its message was not sent (the send row is {status or 'gone'})"
    limit, window = settings.soft_bounce_limit, settings.soft_bounce_days * 86400

    async def keep(conn: asyncpg.Connection) -> bool:
        await conn.execute(db.query("bounce_insert"), report.event_id, row["account_id"], row["id"],
                           report.kind, report.status)
        if report.kind != "soft":
            return True
        await conn.execute(db.query("bounce_lock_mailbox"), row["account_id"], row["email_lower"])
        return await conn.fetchval(db.query("bounce_soft_count"), row["account_id"], row["email_lower"],
                                   window) >= limit

    kind = "complaint" if report.kind == "complaint" else "bounce"
    payload = payload or {"report": report.kind, "status": report.status, "send_id": row["id"]}
    applied = await inbound.apply(conn, report.event_id, kind, row["account_id"], row["email"], payload, keep)
    return "applied" if applied else "repeated"


async def record(conn: asyncpg.Connection, settings: Settings, found: tuple[Report, ...],
                 row_ids: tuple[int, int]) -> tuple[Report | None, str]:
    """Apply the one report of `found` about the send row a verified VERP token named (``about``):
    that report (None if none is) and a word for the log: applied, repeated, or ``dropped: why``."""
    row = await find_row(conn, found[0], row_ids, by_token=True)
    if isinstance(row, str):
        return None, f"dropped: {row}"
    report = about(found, row["email_lower"])
    if report is None:
        return None, f"dropped: none of its {len(found)} recipients is the address of the token's message"
    source, _, rest = report.event_id.partition(":")  # the row's own ids: nobody can take another row's
    report = replace(report, event_id=f"{source}:{row_ids[0]}.{row_ids[1]}:{rest}")
    return report, await apply(conn, settings, report, row)
