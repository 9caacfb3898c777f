"""A batch of subscribers written in one call (POST /api/v1/subscribers/batch): up to MAX_ROWS rows, each an
address, an optional name and attributes, and lists to put it on; each row's outcome back
(docs/design.md#api "Batches").

Each row is checked as the single upsert (`subscriber.upsert`) and the import check theirs: an address
email_validator takes and no control character in it or the name, the text limits of service/text.py, lists
the account has (a batch makes no list: a misspelt name would make one silently). A row that fails is
`invalid` with its one-line reason and nothing of it is written; the valid rows are written, all of them in
one transaction of one statement (einmal.subscribers_upsert_rows, migration 0128): a database error or a lock not
had in time writes none of them, and the retry (under its Idempotency-Key or not) writes what is missing, as
every write is keyed by the mailbox. Rows of one mailbox key, in whatever spelling, are one subscriber, merged
in the batch's order as PUTs one after the other would be: the first spelling makes it, a later name replaces
an earlier one, attributes merge with the later winning, lists add up. A list membership a row makes is
confirmed (the caller asserts consent, as an import does); a sign-up awaiting confirmation stays one. A
suppressed address is written like any other and stays suppressed: its row's status says so."""

import json
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.db import DB_SECONDS
from service.subscribers import subscriber
from service.text import MAX_ATTRIBUTE, MAX_EMAIL, MAX_LIST, MAX_NAME, shown, unsafe_text

MAX_ROWS = 1000  # rows in one batch
MAX_ROW_LISTS = 20  # lists one row names
MAX_ATTRIBUTES = 200  # attributes one row gives, as PUT allows
MAX_ATTRIBUTE_NAME = 200
# the body of a batch: MAX_ROWS rows of about a KiB each; the API's other bodies are bounded at 64 KiB
MAX_BODY = 1024 * 1024


@dataclass(frozen=True)
class Row:
    email: str
    name: str | None = None
    attributes: dict[str, Any] | None = None  # text, once problem() passed the row
    lists: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    email: str  # as the row gave it
    outcome: str  # created, updated or invalid
    id: int | None = None  # the subscriber (of an invalid row: None)
    status: str | None = None  # its state now (einmal.subscriber_state): confirmed, unsubscribed, …
    unconfirmed_lists: tuple[str, ...] = ()  # lists the row named on which it still awaits its confirmation
    reason: str | None = None  # why the row is invalid


def _storable(text: str) -> bool:
    """Whether PostgreSQL can hold `text` in a jsonb value: UTF-8, without NUL."""
    return "\0" not in text and (text.isascii() or not any("\ud800" <= c <= "\udfff" for c in text))


def problem(row: Row) -> str | None:
    """Why the row cannot be written, in one line; None when it can."""
    email = row.email
    if len(email) > MAX_EMAIL:
        return f"email: longer than {MAX_EMAIL} characters"
    trouble = unsafe_text(email) or address_problem(email)
    if trouble:
        return f"not an email address: {trouble}"
    if row.name is not None:
        if len(row.name) > MAX_NAME:
            return f"name: longer than {MAX_NAME} characters"
        if unsafe_text(row.name) or not _storable(row.name):
            return "name: control characters or text that is not UTF-8"
    if row.attributes is not None:
        if len(row.attributes) > MAX_ATTRIBUTES:
            return f"attributes: more than {MAX_ATTRIBUTES}"
        for name, value in row.attributes.items():
            if not name or len(name) > MAX_ATTRIBUTE_NAME or not _storable(name):
                return f"attributes: the name {shown(name)} is not 1 to {MAX_ATTRIBUTE_NAME} characters of text"
            if not isinstance(value, str):  # the API's rows are JSON: a number, a list, null are no text
                kind = {type(None): "null", bool: "true or false", int: "a number", float: "a number"}.get(
                    type(value), "not text"
                )
                return f'attributes: {shown(name)} is {kind}; attribute values are text, e.g. "42"'
            if len(value) > MAX_ATTRIBUTE:
                return f"attributes: {shown(name)} is longer than {MAX_ATTRIBUTE} characters"
            if not _storable(value):
                return f"attributes: {shown(name)} holds a NUL character or bytes that are not UTF-8"
    if len(row.lists) > MAX_ROW_LISTS:
        return f"lists: more than {MAX_ROW_LISTS}"
    for list_name in row.lists:
        if not list_name or len(list_name) > MAX_LIST or unsafe_text(list_name) or not _storable(list_name):
            return f"lists: {shown(list_name)} is not 1 to {MAX_LIST} printable characters"
    return None


def _checked(rows: list[Row]) -> list[tuple[str] | str]:
    """Each row's mailbox key (a 1-tuple), or why it is invalid."""
    return [problem(row) or (email_key(row.email),) for row in rows]


@dataclass
class _Mailbox:
    """The valid rows of one mailbox key, merged in the batch's order."""

    email: str  # its first spelling: the one a new subscriber gets
    key: str
    name: str | None
    attributes: dict[str, str] | None
    lists: dict[int, None]  # list ids, in order
    rows: list[int]  # the indexes of its rows


async def upsert(conn: asyncpg.Connection, *, account_id: int, rows: list[Row]) -> list[Outcome]:
    """Write the valid rows of `rows` for the account (see the module); each row's outcome, in order. Busy when
    an import into the account, or another writer of one of the keys, holds it past subscriber.LOCK_SECONDS."""
    # email_validator takes some 40 µs a row: a thousand would stall the event loop for 40 ms
    checks = await anyio.to_thread.run_sync(_checked, rows)
    outcomes: list[Outcome | None] = [
        None if isinstance(c, tuple) else Outcome(row.email, "invalid", reason=c)
        for row, c in zip(rows, checks, strict=True)
    ]
    checked = [(i, row, c[0]) for i, (row, c) in enumerate(zip(rows, checks, strict=True)) if isinstance(c, tuple)]
    named = sorted({n for _, row, _ in checked for n in row.lists})
    found = (
        {
            r["name"]: r["id"]
            for r in await conn.fetch(
                *db.sql("subscriber_batch_lists", account_id=account_id, names=named), timeout=DB_SECONDS
            )
        }
        if named
        else {}
    )
    mailboxes: dict[str, _Mailbox] = {}
    for i, row, key in checked:
        unknown = [n for n in row.lists if n not in found]
        if unknown:
            outcomes[i] = Outcome(row.email, "invalid", reason=f"lists: the account has no list {shown(unknown[0])}")
            continue
        box = mailboxes.get(key)
        if box is None:
            box = mailboxes[key] = _Mailbox(row.email, key, None, None, {}, [])
        box.rows.append(i)
        if row.name is not None:
            box.name = row.name
        if row.attributes is not None:
            box.attributes = row.attributes if box.attributes is None else {**box.attributes, **row.attributes}
        if row.lists:
            box.lists.update(dict.fromkeys(found[n] for n in row.lists))
    if mailboxes:
        boxes = list(mailboxes.values())
        members = [(n, list_id) for n, box in enumerate(boxes, 1) for list_id in box.lists]
        with subscriber.waiting(
            "an import into this account, or a write of one of its addresses, is running; try again shortly"
        ):
            written = await conn.fetch(
                *db.sql(
                    "subscriber_upsert_batch",
                    account_id=account_id,
                    emails=[b.email for b in boxes],
                    email_keys=[b.key for b in boxes],
                    names=[b.name for b in boxes],
                    attributes=json.dumps([b.attributes for b in boxes], ensure_ascii=False),
                    member_rows=[n for n, _ in members],
                    member_lists=[list_id for _, list_id in members],
                    lock_wait=subscriber.lock_wait(),
                ),
                timeout=DB_SECONDS,
            )
        for number, subscriber_id, created, status, unconfirmed in written:
            box = boxes[number - 1]
            # the first row of a mailbox made its subscriber or updated it; the later ones updated it
            for k, i in enumerate(box.rows):
                outcomes[i] = Outcome(
                    rows[i].email,
                    "created" if created and k == 0 else "updated",
                    subscriber_id,
                    status,
                    tuple(n for n in unconfirmed if n in rows[i].lists) if unconfirmed else (),
                )
    assert all(o is not None for o in outcomes)  # every row is invalid or written
    return [o for o in outcomes if o is not None]
