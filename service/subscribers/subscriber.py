"""An account's subscribers as the API sees them (/api/v1/subscribers): a page of them with a cursor, one by
any spelling of its mailbox, one made or updated, one erased. Each with what is true of it now
(einmal.subscriber_state, migration 0105), its lists and the reason of its mailbox's suppression."""

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.addresses import address_problem, email_key
from service.db import DB_SECONDS
from service.errors import EinmalError, Invalid, NotFound
from service.subscribers import erasure
from service.text import unsafe_text

ATTRIBUTE_WINDOW = 5000  # subscribers walked by id before an attribute's search asks its index
# the most a write of a subscriber (an upsert, a batch, a message's, a sign-up's) waits for an import into its account
# or another writer of its mailbox (einmal.subscriber_lock, migration 0102); then Busy
LOCK_SECONDS = 5.0
IMPORT_RUNNING = "an import into this account is running; try again shortly"


class Busy(EinmalError):
    """An import into the account holds its subscribers: try again shortly."""

    http_status = 503


def lock_wait() -> str:
    """LOCK_SECONDS as the `wait` (a lock_timeout) of einmal.subscriber_lock and the functions that take it."""
    return f"{int(LOCK_SECONDS * 1000)}ms"


@contextlib.contextmanager
def waiting(said: str = IMPORT_RUNNING) -> Iterator[None]:
    """A statement that waits `lock_wait()` for those locks: past it, Busy (503 with Retry-After: not kept for an
    Idempotency-Key), never a 500 nor a 422."""
    try:
        yield
    except asyncpg.LockNotAvailableError:
        raise Busy(said) from None


@dataclass(frozen=True)
class Subscriber:
    id: int
    email: str
    name: str
    status: str  # confirmed, unconfirmed, unsubscribed, bounced, complained or suppressed
    attributes: dict[str, str]
    lists: list[str]  # the lists it is a confirmed member of
    unconfirmed_lists: list[str]  # its sign-ups awaiting confirmation
    suppressed: str | None  # why its mailbox is suppressed for the account, if it is
    created_at: datetime

    @classmethod
    def of(cls, row: asyncpg.Record) -> "Subscriber":
        return cls(
            **{
                **dict(row),
                "attributes": json.loads(row["attributes"]),
                "lists": list(row["lists"]),
                "unconfirmed_lists": list(row["unconfirmed_lists"]),
            }
        )


async def _of_account(
    conn: asyncpg.Connection,
    account_id: int,
    *,
    after_id: int,
    limit: int,
    key: str | None = None,
    status: str | None = None,
    list_name: str | None = None,
) -> list[Subscriber]:
    return await _shown(
        conn,
        "subscribers_of_account",
        account_id=account_id,
        email_key=key,
        after_id=after_id,
        status=status,
        limit=limit,
        list_name=list_name,
    )


async def _shown(conn: asyncpg.Connection, query: str, **values: object) -> list[Subscriber]:
    """The subscribers the query `query` chooses, as einmal.subscribers_shown shows them (migration 0152)."""
    return [Subscriber.of(r) for r in await conn.fetch(*db.sql(query, **values), timeout=DB_SECONDS)]


async def page(
    conn: asyncpg.Connection, *, account_id: int, after_id: int, limit: int, status: str | None, list_name: str | None
) -> list[Subscriber]:
    """The account's subscribers oldest first, the first `limit` after the id `after_id`; `status`: of that
    state only; `list_name`: that list's confirmed members only."""
    return await _of_account(conn, account_id, after_id=after_id, limit=limit, status=status, list_name=list_name)


async def find(conn: asyncpg.Connection, *, account_id: int, email: str) -> Subscriber:
    """The account's subscriber of the mailbox `email` names, in any spelling; NotFound without one."""
    if unsafe_text(email) or address_problem(email):
        raise NotFound("no such subscriber")  # not an address: no subscriber can have it
    found = await _of_account(conn, account_id, after_id=0, limit=1, key=email_key(email))
    if not found:
        raise NotFound("no such subscriber")
    return found[0]


async def with_attribute(
    conn: asyncpg.Connection, *, account_id: int, attribute: str, value: str, after_id: int, limit: int
) -> list[Subscriber]:
    """The account's subscribers whose attribute `attribute` is `value`, oldest first, the first `limit` after
    the id `after_id`: through indexes (migration 0152), never by reading every subscriber."""
    return await _shown(
        conn,
        "subscribers_with_attribute",
        account_id=account_id,
        attribute=attribute,
        value=value,
        after_id=after_id,
        limit=limit,
        window=ATTRIBUTE_WINDOW,
    )


async def upsert(
    conn: asyncpg.Connection, *, account_id: int, email: str, name: str | None, attributes: dict[str, str] | None
) -> tuple[Subscriber, bool]:
    """Make the account's subscriber `email` (True), or update its name (None: unchanged) and merge
    `attributes` into its own (False). Invalid for an address or a name that cannot be taken; Busy while an
    import into the account runs past LOCK_SECONDS."""
    problem = unsafe_text(email) or address_problem(email)
    if problem:
        raise Invalid(f"not an email address: {problem}")
    if name is not None and unsafe_text(name):
        raise Invalid("name: control characters")
    with waiting():
        row = await conn.fetchrow(
            *db.sql(
                "subscriber_upsert",
                account_id=account_id,
                email=email,
                email_key=email_key(email),
                name=name,
                attributes=json.dumps(attributes, ensure_ascii=False) if attributes is not None else None,
                lock_wait=lock_wait(),
            ),
            timeout=DB_SECONDS,
        )
    assert row is not None  # the query returns one row
    [found] = await _of_account(conn, account_id, after_id=row["id"] - 1, limit=1, key=email_key(email))
    return found, row["created"]


async def erase(conn: asyncpg.Connection, *, account_id: int, email: str, actor: str) -> str:
    """Erase the account's subscriber of the mailbox `email` names, with the audit log's line of `actor`, in a
    transaction of its own (erasure.erase: erasure.Unknown, erasure.Busy); return the address it had."""
    async with conn.transaction():
        return await erasure.erase(conn, account_id, email, actor)
