"""A subscriber's lists, for the preference page of the unsubscribe link (service/web/app.py).

The page's token names one subscriber of one account; what is shown and changed is that subscriber's
mailbox in that account: the lists of the account that any of its subscribers with the same mailbox key is
on (docs/design.md#addresses), never another account's. Leaving a list removes those memberships and, in the same
transaction, stops the mailbox's rows not yet on the wire in the account's campaigns that target the list,
unless another of the campaign's lists still reaches it (docs/design.md#api, "The preference page").
Leaving everything is the account-wide unsubscribe, which the page's other form posts (RFC 8058).
"""

from dataclasses import dataclass

import asyncpg

from service import db

MAX_LISTS = 100  # the lists a page shows


@dataclass(frozen=True)
class Left:
    """A list left: its name, its title (None: none), and how many messages of campaigns to it will not be sent."""

    name: str
    title: str | None
    stopped: int


async def lists(conn: asyncpg.Connection, account_id: int, subscriber_id: int) -> list[tuple[int, str | None]]:
    """(id, title) of the account's lists the subscriber's mailbox is on, by name; title None: it has none."""
    rows = await conn.fetch(
        *db.sql("preference_lists", account_id=account_id, subscriber_id=subscriber_id, limit=MAX_LISTS)
    )
    return [(row["id"], row["title"]) for row in rows]


async def leave(conn: asyncpg.Connection, account_id: int, subscriber_id: int, list_id: int) -> Left | None:
    """Take the subscriber's mailbox off the account's list `list_id` and stop what campaigns to it would
    still send it; None when the mailbox was not on that list (or the list is not the account's)."""
    async with conn.transaction():
        locked = await conn.fetch(*db.sql("preference_campaigns_lock", account_id=account_id, list_id=list_id))
        campaigns = [row["id"] for row in locked]
        mailbox = {"account_id": account_id, "subscriber_id": subscriber_id}
        names = await conn.fetch(*db.sql("preference_leave", **mailbox, list_id=list_id))
        if not names:
            return None
        stopped = (
            await conn.fetch(*db.sql("preference_sends_stop", **mailbox, campaign_ids=campaigns)) if campaigns else []
        )
    return Left(names[0]["name"], names[0]["title"], len(stopped))
