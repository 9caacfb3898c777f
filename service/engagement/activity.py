"""A subscriber's last activity: its last delivery, a person's click (and any click), hard bounce, complaint and
one-click unsubscribe, each when it last happened; `last` names the latest of them. `einmal subscribers show` and
GET /api/v1/subscribers/{email} show it. Each is one row's read (sql/queries/engagement_subscriber.sql)."""

from dataclasses import dataclass, fields
from datetime import datetime

import asyncpg

from service import db


@dataclass(frozen=True)
class Activity:
    delivered: datetime | None = None  # its last message answered 250
    clicked: datetime | None = None  # its last click tagged a person's
    clicked_any: datetime | None = None  # its last click, a machine's too
    bounced: datetime | None = None  # its last hard bounce
    complained: datetime | None = None
    unsubscribed: datetime | None = None  # its last one-click unsubscribe
    # an open's time, when opens are tracked, joins here

    @property
    def last(self) -> str | None:
        """The latest of them (a machine's click aside), or None when nothing happened yet."""
        times = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "clicked_any"}
        happened = {name: at for name, at in times.items() if at is not None}
        return max(happened, key=lambda name: happened[name]) if happened else None


async def of_subscriber(conn: asyncpg.Connection, *, subscriber_id: int) -> Activity:
    row = await conn.fetchrow(*db.sql("engagement_subscriber", subscriber_id=subscriber_id), timeout=db.DB_SECONDS)
    return Activity(**dict(row or {}))
