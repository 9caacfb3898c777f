"""A batch of transactional messages in one call (POST /api/v1/messages/batch, docs/design.md#messages
"Batches"): up to MAX_MESSAGES items, each what `messages.send` takes; each item's outcome back, in order.

Each item is checked as `send` checks one, and an item that cannot be sent is `invalid` with its one-line reason
while the others are made. The work common to items is done once: a template is read once per distinct name,
the From rule asked once per distinct From, and the sources compiled once per distinct (subject, text, HTML,
From) in a worker thread; the message ids are taken in one statement. Each item is then made in its own
transaction (`messages.make`), once the account's bound on its queued messages is found to hold them all (else
the call is refused 429, nothing made): an item that fails there (an import holding the account's subscribers) is
invalid, as is every item after it without waiting for the import again, and the ones made before stay made.

Idempotency, beyond the API's middleware (which replays the call's answer for EINMAL_MESSAGE_KEY_HOURS): with the
request's Idempotency-Key `k`, item `i` is made under the key `k:i` (`item_key`), so that a retry of the route itself,
after a node died between the items' commits and the answer, finds each item made before (one statement for
all) and makes only the ones that are missing. The keys are the account's, as a single message's are: a single
message sent with the key `k:0` is the batch's item 0."""

from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import asyncpg

from service import db
from service.db import DB_SECONDS
from service.errors import Invalid, NotFound
from service.mail import from_rule
from service.mail.mailing import Mailing
from service.messages import messages
from service.subscribers import subscriber

MAX_MESSAGES = 100  # items in one batch
# the body of a batch: MAX_MESSAGES items of some 10 KiB each (sources and data); the API's other bodies, a
# single message's among them, are bounded at 64 KiB
MAX_BODY = 1024 * 1024


@dataclass(frozen=True)
class Item:
    to: str
    template_name: str | None = None
    subject: str | None = None
    body_text: str | None = None
    body_html: str | None = None
    from_address: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    honour_unsubscribe: bool = False


@dataclass(frozen=True)
class Outcome:
    outcome: str  # queued or invalid
    id: int | None = None  # the message (of an invalid item: None)
    created: bool = False  # False: made before under its key (or invalid)
    reason: str | None = None  # why the item is invalid


def item_key(idempotency_key: str, index: int) -> str:
    """The Idempotency-Key item `index` (from 0) of a batch under `idempotency_key` is made under."""
    return f"{idempotency_key}:{index}"


@dataclass(frozen=True)
class _Ready:
    """An item checked and resolved: what `messages.make` takes."""

    email: str
    payload: str
    sources: tuple[str, str, str | None, str]  # subject, text, HTML, From


def _checked(items: list[tuple[int, Item]]) -> dict[int, tuple[str, str] | str]:
    """Each item's (address, data as JSON), or why it is invalid."""
    checked: dict[int, tuple[str, str] | str] = {}
    for i, item in items:
        try:
            checked[i] = (messages.recipient(item.to), messages.payload_of(item.data))
        except Invalid as e:
            checked[i] = str(e)
    return checked


async def send(
    conn: asyncpg.Connection,
    *,
    queueing: messages.Queueing,
    account_id: int,
    items: list[Item],
    idempotency_key: str | None = None,
) -> list[Outcome]:
    """Queue the valid items of `items` for the account (see the module); each item's outcome, in order."""
    if not 1 <= len(items) <= MAX_MESSAGES:
        raise Invalid(f"messages: 1 to {MAX_MESSAGES} in a batch")
    outcomes: list[Outcome | None] = [None] * len(items)
    keys = [item_key(idempotency_key, i) if idempotency_key is not None else None for i in range(len(items))]
    if idempotency_key is not None:  # a retry: the items made before are its answer, without a compile
        found = {
            r["idempotency_key"]: r["campaign_id"]
            for r in await conn.fetch(
                *db.sql("message_by_keys", account_id=account_id, idempotency_keys=keys), timeout=DB_SECONDS
            )
        }
        for i, k in enumerate(keys):
            if k in found:
                outcomes[i] = Outcome("queued", found[k], created=False)
    pending = [(i, item) for i, item in enumerate(items) if outcomes[i] is None]
    # email_validator takes some 40 µs an address: off the event loop, as the subscriber batch does
    checks = await anyio.to_thread.run_sync(_checked, pending)
    templates: dict[str, messages.Template | str] = {}
    froms: dict[str, str | None] = {}
    compiled: dict[tuple[str, str, str | None, str], str | None] = {}
    ready: dict[int, _Ready] = {}
    for i, item in pending:
        check = checks[i]
        if isinstance(check, str):
            outcomes[i] = Outcome("invalid", reason=check)
            continue
        problem, sources = await _sources(conn, queueing.mailing, account_id, item, templates, froms, compiled)
        if sources is None:
            outcomes[i] = Outcome("invalid", reason=problem)
            continue
        ready[i] = _Ready(check[0], check[1], sources)
    if ready:  # past the account's bound on its queued messages: none of them is made (429)
        await messages.room_for(conn, queueing=queueing, account_id=account_id, n=len(ready))
    ids = (
        [r["id"] for r in await conn.fetch(*db.sql("message_ids_next", n=len(ready)), timeout=DB_SECONDS)]
        if ready
        else []
    )
    busy: str | None = None  # an import holds the account's subscribers: the items left do not wait for it again
    for (i, r), campaign_id in zip(ready.items(), ids, strict=True):
        if busy is not None:
            outcomes[i] = Outcome("invalid", reason=busy)
            continue
        subject, body_text, body_html, from_address = r.sources
        try:
            made = await messages.make(
                conn,
                account_id=account_id,
                email=r.email,
                payload=r.payload,
                template_name=items[i].template_name,
                subject=subject,
                body_text=body_text,
                body_html=body_html,
                from_address=from_address,
                honour_unsubscribe=items[i].honour_unsubscribe,
                idempotency_key=keys[i],
                campaign_id=campaign_id,
            )
        except subscriber.Busy as e:
            busy = str(e)
            outcomes[i] = Outcome("invalid", reason=busy)
            continue
        except Invalid as e:
            outcomes[i] = Outcome("invalid", reason=str(e))
            continue
        outcomes[i] = Outcome("queued", made.id, created=made.created)
    assert all(o is not None for o in outcomes)  # each item was found, made or found invalid
    return [o for o in outcomes if o is not None]


async def _sources(
    conn: asyncpg.Connection,
    mailing: Mailing,
    account_id: int,
    item: Item,
    templates: dict[str, messages.Template | str],
    froms: dict[str, str | None],
    compiled: dict[tuple[str, str, str | None, str], str | None],
) -> tuple[str | None, tuple[str, str, str | None, str] | None]:
    """(None, the item's subject, text, HTML and From), or (why it cannot be sent, None); as `messages.send`
    resolves and checks them, each template, From and set of sources once a batch (the dicts: what was found)."""
    subject, body_text, body_html, from_address = item.subject, item.body_text, item.body_html, item.from_address
    if item.template_name is not None:
        if subject is not None or body_text is not None or body_html is not None:
            return "give a template or subject and text, not both", None
        if item.template_name not in templates:
            try:
                templates[item.template_name] = await messages.template(
                    conn, account_id=account_id, name=item.template_name
                )
            except NotFound as e:
                templates[item.template_name] = f"template: {e}"
        source = templates[item.template_name]
        if isinstance(source, str):
            return source, None
        subject, body_text, body_html = source.subject, source.body_text, source.body_html
        from_address = from_address or source.from_address
    elif subject is None or body_text is None:
        return "a template, or a subject and a text, is needed", None
    if not from_address:
        return "from: none given, and the template has none", None
    if from_address not in froms:
        try:
            await from_rule.check(conn, mailing=mailing, account_id=account_id, address=from_address, said="from")
            froms[from_address] = None
        except Invalid as e:
            froms[from_address] = str(e)
    if froms[from_address] is not None:
        return froms[from_address], None
    sources = (subject, body_text, body_html, from_address)
    if sources not in compiled:
        try:
            await messages.check_sources(
                mailing, subject=subject, body_text=body_text, body_html=body_html, from_address=from_address
            )
            compiled[sources] = None
        except Invalid as e:
            compiled[sources] = str(e)
    if compiled[sources] is not None:
        return compiled[sources], None
    return None, sources
