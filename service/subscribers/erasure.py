"""Erasure of one subscriber (GDPR art. 17): `einmal subscribers delete` and `DELETE /api/v1/subscribers/…`.

The subscriber leaves every list, its address, name and attributes are erased from its row and from its
send rows (replaced by a placeholder, `erased-<id>@erased.invalid`), replies that may quote it are
dropped, its clicks deleted, a row still queued is settled as suppressed, and its progress in sequences is deleted. The
address's suppression is kept (one is added with reason `erased` when there was none), so a later import of
the same address is never mailed. A subscriber whose message is being sent right now is refused: try again
when it is done."""

import asyncpg

from service import audit, db
from service.addresses import email_key
from service.errors import Conflict, NotFound
from service.subscribers.suppressions import suppress
from service.text import shown

ERASED_REASON = "erased"


class Unknown(NotFound):
    """The account has no such subscriber (or it was erased before)."""


class Busy(Conflict):
    """A message to the subscriber is on its way: erasing now would race the send."""


async def erase(conn: asyncpg.Connection, account_id: int, email: str, actor: str | None = None) -> str:
    """Erase the account's subscriber whose mailbox `email` names (its exact spelling first), inside the
    caller's transaction; return the address it had. `actor`: who asked, for the audit log's line
    (`subscriber.erase`, naming the subscriber by its id, never by the address erased)."""
    rows = await conn.fetch(*db.sql("subscriber_find", account_id=account_id, key=email_key(email), spelling=email))
    if not rows:
        raise Unknown(f"the account has no subscriber {shown(email)}")
    subscriber = rows[0]  # subscriber_find orders the exact spelling first
    # its progress in sequences goes first (docs/design.md#sequences): deleting it waits for a sweep that holds it,
    # so the statements below see, and erase, a step row that sweep queued; no sweep advances it after
    await conn.execute(*db.sql("sequence_members_erase", subscriber_id=subscriber["id"]))
    states = {r["status"] for r in await conn.fetch(*db.sql("subscriber_sends_lock", subscriber_id=subscriber["id"]))}
    if states & {"claimed", "sending"}:
        raise Busy(f"a message to {shown(subscriber['email'])} is being sent right now; try again when it is done")
    await suppress(conn, account_id, [subscriber["email"]], ERASED_REASON)
    placeholder = f"erased-{subscriber['id']}@erased.invalid"
    await conn.execute(*db.sql("subscriber_sends_erase", subscriber_id=subscriber["id"], placeholder=placeholder))
    await conn.execute(*db.sql("subscriber_erase", subscriber_id=subscriber["id"], placeholder=placeholder))
    await conn.execute(*db.sql("subscriber_engagement_erase", subscriber_id=subscriber["id"]))
    if actor is not None:
        subject = f"subscriber {subscriber['id']}"
        await audit.record(conn, actor=actor, account_id=account_id, action="subscriber.erase", subject=subject)
    return subscriber["email"]
