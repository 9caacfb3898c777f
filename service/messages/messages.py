"""Transactional messages (docs/design.md#messages): a message is made as a campaign of kind 'message' with
one send row in einmal.sends_messages, so that the claim, its fence, the writer's CAS, the rescue, in_doubt and
reconcile, VERP bounces and the Message-ID all work on it as on any campaign's row.

`send` is idempotent by itself, not only behind the API's Idempotency-Key middleware: the message row is
inserted keyed by (account, Idempotency-Key) ON CONFLICT DO NOTHING, and its campaign and send row in the same
transaction only when it was new; a retry, on any node and after any crash, finds the same message. A message
copies its template's sources when made; its data is merged over its subscriber's attributes when rendered
(`{{ attributes.order }}`)."""

import hashlib
import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio
import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.campaigns import fields
from service.db import DB_SECONDS
from service.errors import Busy, Invalid, NotFound
from service.mail import from_rule, render
from service.mail.mailing import Mailing
from service.mail.slots import RenderSlots
from service.settings import Settings
from service.subscribers import subscriber
from service.text import MAX_EMAIL, shown, unsafe_text

MESSAGE_IDS_FROM = 2**52  # einmal.message_ids: every message's campaign id is at least this
MAX_TEMPLATE_NAME = 200
MAX_DATA = 64 * 1024  # characters of a message's data as JSON
TRIED = 1024  # sources whose trial render passed, kept per process: a second check of them renders nothing


@dataclass(frozen=True)
class Queueing:
    """The messages' section of the settings, read once from Settings: what making a message needs (Mailing),
    and an account's bound on its queued messages and its rate where it has none of its own."""

    mailing: Mailing
    messages_queued: int  # EINMAL_ACCOUNT_MESSAGES_QUEUED
    account_rate: float  # EINMAL_ACCOUNT_RATE_LIMIT, else EINMAL_RATE_LIMIT
    rate: float  # EINMAL_RATE_LIMIT

    @classmethod
    def of(cls, settings: Settings) -> "Queueing":
        return cls(
            Mailing.of(settings),
            settings.account_messages_queued,
            settings.account_rate_limit or settings.rate_limit,
            settings.rate_limit,
        )


@dataclass(frozen=True)
class Template:
    name: str
    subject: str
    body_text: str
    body_html: str | None
    from_address: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Made:
    id: int
    created: bool  # False: the Idempotency-Key's message, made before


@dataclass(frozen=True)
class Message:
    id: int
    state: str  # queued, sending, sent, failed, suppressed, in_doubt
    email: str
    subject: str
    from_address: str
    template: str | None
    data: dict[str, Any]
    honour_unsubscribe: bool
    attempts: int
    last_reply: str | None
    sent_at: datetime | None
    created_at: datetime
    bounces: list[str]


STATES = {"claimed": "queued"}  # how a row's status is told: a claimed row has not gone yet


TEMPLATE_FROM = "template@example.com"  # the From a template without one is tried with


def checked_name(name: str) -> str:
    if not name or len(name) > MAX_TEMPLATE_NAME or unsafe_text(name) or name != name.strip():
        raise Invalid(f"template name {shown(name)}: 1 to {MAX_TEMPLATE_NAME} characters, no control characters")
    return name


def recipient(to: str) -> str:
    """`to` as a message is sent to it; Invalid, one line, when it is no email address."""
    email = to.strip(" ")
    if problem := (
        "longer than 254 characters" if len(email) > MAX_EMAIL else unsafe_text(email) or address_problem(email)
    ):
        raise Invalid(f"to: not an email address: {problem}")
    return email


def payload_of(data: dict[str, Any] | None) -> str:
    """A message's data as the JSON it is stored as; Invalid when longer than MAX_DATA."""
    payload = json.dumps(data or {}, ensure_ascii=False)
    if len(payload) > MAX_DATA:
        raise Invalid(f"data: longer than {MAX_DATA} characters as JSON")
    return payload


async def check_sources(
    mailing: Mailing,
    *,
    subject: str,
    body_text: str,
    body_html: str | None,
    from_address: str,
    account_id: int = 0,
    slots: RenderSlots | None = None,
) -> None:
    """Invalid, one line, when the From is not one a campaign may have (a quoted local part, say: the same rule
    as campaign create's) or the sources cannot be compiled in the sandbox (in a worker thread). Sources that
    passed in this process with this `mailing` pass again without a render: the API tries them before it takes
    a connection, `send` and `put_template` then find them tried (docs/design.md#templates)."""
    fields.from_address(from_address, "from")
    content = "\0".join((subject, body_text, body_html or "\1", from_address))
    tried = (id(mailing), hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest())
    if tried in _tried:
        _tried.move_to_end(tried)
        return
    campaign = {
        "id": MESSAGE_IDS_FROM,
        "account_id": 0,
        "name": "message",
        "subject": subject,
        "body_text": body_text,
        "body_html": body_html,
        "from_address": from_address,
        "kind": "message",
        "unsubscribe_required": False,
    }
    if slots is None:
        await anyio.to_thread.run_sync(render.CampaignTemplate.compile, campaign, mailing)
    else:  # in the account's share of the render threads
        await slots.run(account_id, render.CampaignTemplate.compile, campaign, mailing)
    _tried[tried] = mailing  # held, so that its id names no other section meanwhile
    if len(_tried) > TRIED:
        _tried.popitem(last=False)


_tried: OrderedDict[tuple[int, bytes], Mailing] = OrderedDict()


async def put_template(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    name: str,
    subject: str,
    body_text: str,
    body_html: str | None,
    from_address: str | None,
) -> tuple[Template, bool]:
    """Make or replace the account's template `name` (checked as a message's sources are); it and whether it is
    new. Messages already made keep the sources they were made with."""
    checked_name(name)
    if from_address:
        await from_rule.check(conn, mailing=mailing, account_id=account_id, address=from_address, said="from")
    await check_sources(
        mailing,
        subject=subject,
        body_text=body_text,
        body_html=body_html,
        from_address=from_address or TEMPLATE_FROM,
    )
    created = await conn.fetchval(
        *db.sql(
            "message_template_put",
            account_id=account_id,
            template_name=name,
            subject=subject,
            body_text=body_text,
            body_html=body_html,
            from_address=from_address,
        ),
        timeout=DB_SECONDS,
    )
    return await template(conn, account_id=account_id, name=name), bool(created)


async def template(conn: asyncpg.Connection, *, account_id: int, name: str) -> Template:
    row = await conn.fetchrow(
        *db.sql("message_template_get", account_id=account_id, template_name=name), timeout=DB_SECONDS
    )
    if row is None:
        raise NotFound("no such message template")
    return Template(**dict(row))


async def templates(conn: asyncpg.Connection, *, account_id: int) -> list[Template]:
    rows = await conn.fetch(*db.sql("message_templates_of_account", account_id=account_id), timeout=DB_SECONDS)
    return [Template(**dict(r)) for r in rows]


async def remove_template(conn: asyncpg.Connection, *, account_id: int, name: str) -> None:
    if not await conn.fetchval(
        *db.sql("message_template_delete", account_id=account_id, template_name=name), timeout=DB_SECONDS
    ):
        raise NotFound("no such message template")


async def room_for(conn: asyncpg.Connection, *, queueing: Queueing, account_id: int, n: int) -> None:
    """Busy (429 with Retry-After) when `n` more messages would pass the account's bound on its messages queued
    and not yet sent (its own, else EINMAL_ACCOUNT_MESSAGES_QUEUED): nothing is made then. Retry-After is the time
    its rate (its own, else the installation's) takes to send the excess. Counted before the messages are made:
    calls of the account at the same moment may each pass it by their own messages."""
    row = await conn.fetchrow(
        *db.sql(
            "message_queued_count",
            account_id=account_id,
            default_max=queueing.messages_queued,
            default_rate=queueing.account_rate,
        ),
        timeout=DB_SECONDS,
    )
    if row is None or not row["bound"] or row["queued"] + n <= row["bound"]:
        return
    excess = row["queued"] + n - row["bound"]
    rate = row["rate"] or queueing.rate
    raise Busy(
        f"this account has {row['bound']} messages or more queued and not yet sent, its bound: try again later",
        math.ceil(excess / rate) if rate else 5,
    )


async def send(
    conn: asyncpg.Connection,
    *,
    queueing: Queueing,
    account_id: int,
    to: str,
    template_name: str | None = None,
    subject: str | None = None,
    body_text: str | None = None,
    body_html: str | None = None,
    from_address: str | None = None,
    data: dict[str, Any] | None = None,
    honour_unsubscribe: bool = False,
    idempotency_key: str | None = None,
) -> Made:
    """Queue one message to `to`, from the account's template `template_name` or the sources given, and return its
    id at once. With `idempotency_key`, the account's message made with that key (and kept,
    EINMAL_MESSAGE_KEY_HOURS) is the answer, and nothing new is made. An address with no subscriber of the account
    gets one, on no list (as `PUT /subscribers/{email}` makes it). Invalid for anything that cannot be sent."""
    email = recipient(to)
    payload = payload_of(data)
    if idempotency_key is not None:  # the usual case of a retry: no template read, no compile
        found = await conn.fetchval(
            *db.sql("message_by_key", account_id=account_id, idempotency_key=idempotency_key), timeout=DB_SECONDS
        )
        if found is not None:
            return Made(found, False)
    if template_name is not None:
        if subject is not None or body_text is not None or body_html is not None:
            raise Invalid("give a template or subject and text, not both")
        source = await template(conn, account_id=account_id, name=template_name)
        subject, body_text, body_html = source.subject, source.body_text, source.body_html
        from_address = from_address or source.from_address
    elif subject is None or body_text is None:
        raise Invalid("a template, or a subject and a text, is needed")
    if not from_address:
        raise Invalid("from: none given, and the template has none")
    await from_rule.check(conn, mailing=queueing.mailing, account_id=account_id, address=from_address, said="from")
    await check_sources(
        queueing.mailing, subject=subject, body_text=body_text, body_html=body_html, from_address=from_address
    )
    await room_for(conn, queueing=queueing, account_id=account_id, n=1)
    return await make(
        conn,
        account_id=account_id,
        email=email,
        payload=payload,
        template_name=template_name,
        subject=subject,
        body_text=body_text,
        body_html=body_html,
        from_address=from_address,
        honour_unsubscribe=honour_unsubscribe,
        idempotency_key=idempotency_key,
    )


async def make(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    email: str,
    payload: str,
    template_name: str | None,
    subject: str,
    body_text: str,
    body_html: str | None,
    from_address: str,
    honour_unsubscribe: bool,
    idempotency_key: str | None,
    campaign_id: int | None = None,
) -> Made:
    """Make one message of sources already checked (`recipient`, `payload_of`, the From rule, `check_sources`), in
    one statement (einmal.message_make): its row keyed by (account, `idempotency_key`), and only when that is new
    its subscriber, campaign and send row; the key's message made before otherwise. `campaign_id`: an id of
    einmal.message_ids taken before (a batch takes its ids in one statement), else one is taken there."""
    made = db.sql(
        "message_make",
        account_id=account_id,
        campaign_id=campaign_id,
        idempotency_key=idempotency_key,
        template=template_name,
        data=payload,
        honour_unsubscribe=honour_unsubscribe,
        email=email,
        email_key=email_key(email),
        campaign_name=template_name or "message",
        subject=subject,
        from_address=from_address,
        body_text=body_text,
        body_html=body_html,
        lock_wait=subscriber.lock_wait(),
    )
    with subscriber.waiting():  # no caller holds a transaction: the statement is one of its own, one round trip
        row = await conn.fetchrow(*made, timeout=DB_SECONDS)
    assert row is not None  # the function returns one row
    return Made(row["message_id"], row["created"])


async def show(conn: asyncpg.Connection, *, account_id: int, message_id: int) -> Message:
    """The account's message `message_id` as its send row has it; NotFound for another account's, or none."""
    row = await conn.fetchrow(*db.sql("message_get", campaign_id=message_id, account_id=account_id), timeout=DB_SECONDS)
    if row is None:
        raise NotFound("no such message")
    return Message(
        id=row["id"],
        state=STATES.get(row["status"], row["status"]),
        email=row["email"],
        subject=row["subject"],
        from_address=row["from_address"],
        template=row["template"],
        data=json.loads(row["data"]),
        honour_unsubscribe=row["honour_unsubscribe"],
        attempts=row["attempts"],
        last_reply=row["last_reply"],
        sent_at=row["sent_at"],
        created_at=row["created_at"],
        bounces=list(row["bounces"]),
    )


@dataclass(frozen=True)
class Listed:
    id: int
    state: str
    email: str
    subject: str
    template: str | None
    sent_at: datetime | None
    created_at: datetime


async def listing(
    conn: asyncpg.Connection, *, account_id: int, before: int = 2**63 - 1, limit: int = 50
) -> list[Listed]:
    """The account's messages below id `before`, newest first, `limit` of them (at most 1,000)."""
    rows = await conn.fetch(
        *db.sql("messages_list", account_id=account_id, before=before, limit=max(1, min(limit, 1000))),
        timeout=DB_SECONDS,
    )
    return [
        Listed(
            r["id"],
            STATES.get(r["status"], r["status"]),
            r["email"],
            r["subject"],
            r["template"],
            r["sent_at"],
            r["created_at"],
        )
        for r in rows
    ]


async def prune(conn: asyncpg.Connection, *, settings: Settings) -> int:
    """Delete the messages older than EINMAL_MESSAGE_RETENTION_DAYS whose row is settled, with their send row and
    campaign (none with it unset); how many."""
    if settings.message_retention_days is None:
        return 0
    pruned = 0
    for _ in range(100):  # bounded: 100 batches a pass, the rest at the next
        gone = await conn.fetch(
            *db.sql("message_prune", older_than_seconds=settings.message_retention_days * 86400, batch=500),
            timeout=DB_SECONDS,
        )
        pruned += len(gone)
        if len(gone) < 500:
            break
    return pruned


async def prune_keys(conn: asyncpg.Connection, *, settings: Settings) -> int:
    """Forget the Idempotency-Keys of messages older than EINMAL_MESSAGE_KEY_HOURS; how many."""
    pruned = 0
    for _ in range(100):  # bounded: 100 batches a pass, the rest at the next
        result = await conn.execute(
            *db.sql("message_keys_prune", key_seconds=settings.message_key_hours * 3600, batch=1000),
            timeout=DB_SECONDS,
        )
        n = int(result.rpartition(" ")[2])
        pruned += n
        if n < 1000:
            break
    return pruned
