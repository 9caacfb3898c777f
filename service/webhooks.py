"""Provider webhooks: bounces and complaints reported over HTTP, each applied once (docs/design.md §8, §10).

    POST /inbound/ses[/ACCOUNT]        Amazon SES through SNS (service/provider_ses.py)
    POST /inbound/postmark[/ACCOUNT]   Postmark (service/provider_postmark.py)
    POST /inbound/mailgun[/ACCOUNT]    Mailgun (service/provider_mailgun.py)

A provider whose secret or certificate is not configured is not served (404). Its module checks
the request (signature or basic auth: 401 or 403) and reads the events in it (400 when it cannot);
each event names an address, a kind (hard, soft, complaint) and a stable id (`ses:…`,
`postmark:…`, `mailgun:…`). Each is then tied to one send row and applied through
`bounces.apply` (inbound.apply with the einmal.bounces row), so a redelivery changes nothing:

1. The message itself: a VERP token in an envelope sender, or a Message-ID `<campaign.C.S@…>`,
   when the provider passes the original headers on. That row is used when its address is the
   event's (else that campaign's row for the event's address).
2. Else the address: the newest send row to it, within the account the URL names
   (`/inbound/ses/acme`). Without an account in the URL the address must have been mailed by one
   account only; mailed by several, the event is dropped with a line saying to name the account.

An event einmal cannot tie to a row of its own is dropped: one log line, nothing written, 200
(the provider must not retry it). The payload hashed for the event id is the provider's event
(kind, status, address), not the row found, so a redelivery after a newer campaign is the same.
"""

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import asyncpg

from service import bounces, db
from service.addresses import email_key
from service.settings import Settings
from service.verp import ReturnPath

log = logging.getLogger("einmal.webhooks")

MAX_BODY = 1024 * 1024  # a provider's event batch; larger bodies are refused (413) while they stream in
MAX_ID = 200
_OUR_ID = re.compile(r"<?campaign\.([1-9]\d{0,18})\.([1-9]\d{0,18})@[^<>\s]+>?")


class Rejected(Exception):
    """A request refused before anything is written: its HTTP status and one line for the log."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


@dataclass(frozen=True)
class Event:
    kind: str  # hard | soft | complaint
    status: str  # 5.1.1, Permanent/General, HardBounce, abuse, …
    recipient: str
    event_id: str  # <provider>:<the provider's id>
    identities: tuple[str, ...] = ()  # envelope senders and Message-IDs of the original message


def json_object(body: bytes | str, what: str = "the body") -> dict:
    """The JSON object in `body`; Rejected (400) when it is not JSON or not an object."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Rejected(400, f"{what} is not JSON") from None
    if not isinstance(document, dict):
        raise Rejected(400, f"{what} is not a JSON object")
    return document


def text(value: object, what: str, limit: int = 320) -> str:
    """A field that must be a short printable string (numbers allowed, as ids often are)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Rejected(400, f"{what} is missing or not a string")
    value = str(value).strip()
    if not value or len(value) > limit or not value.isprintable():
        raise Rejected(400, f"{what} is empty, too long or not printable")
    return value


def short(value: object, default: str, limit: int = 40) -> str:
    """An optional descriptive field (a status, a type): itself when it is short printable text, else `default`."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = str(value).strip()
        if value and len(value) <= limit and value.isprintable():
            return value
    return default


def address(value: object, what: str) -> str:
    found = text(value, what).strip("<>")
    if "@" not in found[1:-1]:
        raise Rejected(400, f"{what} is not an address")
    return found


def event_id(provider: str, value: object, what: str) -> str:
    return f"{provider}:{text(value, what, MAX_ID)}"


def identify(path: ReturnPath | None, identities: Iterable[str]) -> tuple[int, int] | None:
    """(campaign, subscriber) named by a verified VERP token or one of einmal's Message-IDs."""
    for identity in identities:
        if not isinstance(identity, str) or len(identity) > 400:
            continue
        if path is not None:
            ours, token = path.ours(identity)
            if ours and token and (ids := path.verify(token)):
                return ids
        if found := _OUR_ID.fullmatch(identity.strip()):
            return int(found[1]), int(found[2])
    return None


async def _row(conn: asyncpg.Connection, path: ReturnPath | None, event: Event,
               account_id: int | None) -> asyncpg.Record | str:
    report = bounces.Report(event.kind, event.status, event.recipient, identify(path, event.identities),
                            event.event_id)
    if report.original is not None:
        row = await bounces.find_row(conn, report, report.original, by_token=False)
        if not isinstance(row, str) and account_id in (None, row["account_id"]):
            return row
    rows = await conn.fetch(db.query("bounce_send_rows_mailbox"), email_key(event.recipient), account_id)
    if len(rows) == 1:
        return rows[0]
    if not rows:
        return "no message of ours to that address" + (" in that account" if account_id else "")
    return "the address was mailed from several accounts: name the account in the webhook URL"


async def record(conn: asyncpg.Connection, settings: Settings, path: ReturnPath | None, event: Event,
                 account_id: int | None) -> str:
    """Apply one event: applied, repeated, or `dropped: why`. UsageError: its id came with another payload."""
    row = await _row(conn, path, event, account_id)
    if isinstance(row, str):
        return f"dropped: {row}"
    report = bounces.Report(event.kind, event.status, event.recipient, None, event.event_id)
    payload = {"report": event.kind, "status": event.status, "recipient": email_key(event.recipient)}
    return await bounces.apply(conn, settings, report, row, payload)
