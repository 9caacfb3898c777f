"""Provider webhooks: bounces and complaints reported over HTTP, each applied once (docs/design.md#inbound-events,
#listening-surface).

    POST /inbound/ses[/ACCOUNT]        Amazon SES through SNS (service/inbound/ses.py)
    POST /inbound/postmark[/ACCOUNT]   Postmark (service/inbound/postmark.py)
    POST /inbound/mailgun[/ACCOUNT]    Mailgun (service/inbound/mailgun.py)

A provider without a credential is not served (404). Its module checks the request (a signature,
or basic auth: 401 or 403; Postmark's from the headers, before the body is read) and reads the
events in it (400 when it cannot) into a `Delivery`: the events, each with an address, a kind
(hard, soft, complaint) and a stable id (`ses:…`, `postmark:…`, `mailgun:…`), and the account the
credential vouches for (service/inbound/webhook_credentials.py). The account in the URL may only repeat
it (else 403). Each event is then tied to one send row of that account and applied through
`bounces.apply` (inbound.apply with the einmal.bounces row), so a redelivery changes nothing:

1. The message itself, when the provider vouches for what names it (the message as the provider
   sent it for us: a VERP token in its envelope sender, or einmal's Message-ID `<campaign.C.S@…>`
   in its headers; never a bounce's content, which a third party wrote): a token at the
   environment's return path or at an account's own, verified as the inbound listener does
   (``identify``: an account's with its keys, for its campaigns only). That row, when it is the
   account's and its address is the event's (else that campaign's row for the event's address).
2. Else the address: the account's newest send row to it whose message went out.

An event einmal cannot tie to a row of its own is dropped: one log line, nothing written, 200
(the provider must not retry it). The payload hashed for the event id is the provider's event
(kind, status, address), not the row found, so a redelivery after a newer campaign is the same.
"""

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial

import asyncpg

from service import db
from service.addresses import email_key
from service.inbound import bounces
from service.mail.verp import ReturnPath

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
    identities: tuple[str, ...] = ()  # envelope sender, Message-IDs: the provider's record of what it sent


@dataclass(frozen=True)
class Delivery:
    """What one authenticated request carries."""

    events: list[Event]
    account: str | None  # the account its credential vouches for; None: the only one (a global credential)
    token: tuple[str, str, float] | None = None  # a one-time token: (token, hash of its event, kept until)


class Provider:
    name: str

    def check_headers(self, headers: Mapping[str, str]) -> None:
        """Rejected when the headers alone show the request is not the provider's (before the body is read).
        The default: nothing to check, the provider signs inside the body."""

    def read(self, headers: Mapping[str, str], body: bytes) -> Delivery:
        raise NotImplementedError


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


async def identify(
    conn: asyncpg.Connection, rules: bounces.Rules, path: ReturnPath | None, identities: Iterable[str]
) -> tuple[int, int] | None:
    """(campaign, subscriber) named by one of einmal's Message-IDs or a VERP token verified as the inbound
    listener verifies it (bounces.find_paths, bounces.verify_token): at the environment's return path `path`
    with its keys, at an account's own return path with that account's keys and for its own campaign only."""
    accounts: dict[str, list[tuple[int, ReturnPath]]] | None = None  # read once, for a token at no env path
    for identity in identities:
        if not isinstance(identity, str) or len(identity) > 400:
            continue
        if accounts is None and "+" in identity and not (path is not None and path.ours(identity)[0]):
            accounts = bounces.account_paths(await conn.fetch(*db.sql("account_return_paths")), rules.mailing)
        paths, token = bounces.find_paths(path, accounts or {}, identity)
        if token and (ids := await bounces.verify_token(paths, token, partial(bounces.campaign_owner, conn))):
            return ids
        if found := _OUR_ID.fullmatch(identity.strip()):
            return int(found[1]), int(found[2])
    return None


async def claim_token(conn: asyncpg.Connection, token: str, digest: str, until: float) -> None:
    """Accept a one-time token for one event only: Rejected (403) when it came before with another."""
    await conn.execute(*db.sql("webhook_tokens_prune"))
    if await conn.fetchval(*db.sql("webhook_token_claim", token=token, digest=digest, expires_at=until)) != digest:
        raise Rejected(403, "a signature already used for another event")


async def _row(
    conn: asyncpg.Connection, rules: bounces.Rules, path: ReturnPath | None, event: Event, account_id: int
) -> asyncpg.Record | str:
    original = await identify(conn, rules, path, event.identities)
    report = bounces.Report(event.kind, event.status, event.recipient, original, event.event_id)
    if report.original is not None:
        row = await bounces.find_row(conn, report, report.original, by_token=False)
        if not isinstance(row, str) and row["account_id"] == account_id:
            return row
    mailbox = await conn.fetchrow(
        *db.sql("bounce_send_rows_mailbox", account_id=account_id, email_key=email_key(event.recipient))
    )
    return "no message of that account went out to that address" if mailbox is None else mailbox


async def record(
    conn: asyncpg.Connection, rules: bounces.Rules, path: ReturnPath | None, event: Event, account_id: int
) -> str:
    """Apply one event: applied, repeated, or `dropped: why`. Conflict: its id came with another payload."""
    row = await _row(conn, rules, path, event, account_id)
    if isinstance(row, str):
        return f"dropped: {row}"
    report = bounces.Report(event.kind, event.status, event.recipient, None, event.event_id)
    payload = {"report": event.kind, "status": event.status, "recipient": email_key(event.recipient)}
    return await bounces.apply(conn, rules, report, row, payload)
