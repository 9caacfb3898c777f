"""A campaign over time: its messages sent, failed and hard-bounced, and the recipients people clicked for when
it tracks clicks, counted in equal spans from the first of these moments to the last (the console's chart)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from service import db

KINDS = ("sent", "failed", "bounced", "clicked")
BUCKETS = 24


@dataclass(frozen=True)
class Timeline:
    first: datetime | None  # the first moment counted; None: nothing happened yet
    width: float  # seconds a bucket spans
    counts: dict[str, list[int]]  # per kind (KINDS), a count per bucket, up to the last with any

    def at(self, bucket: int) -> datetime | None:
        """When the bucket starts."""
        return self.first + timedelta(seconds=self.width * bucket) if self.first else None


async def of_campaign(
    conn: asyncpg.Connection, *, campaign_id: int, buckets: int = BUCKETS, timeout: float | None = None
) -> Timeline:
    """The campaign's timeline in `buckets` equal spans of a second at least, so fewer of them when it all
    happened within seconds (a campaign that is not there, or where nothing happened yet, has none)."""
    rows = await conn.fetch(*db.sql("campaign_timeline", campaign_id=campaign_id, buckets=buckets), timeout=timeout)
    used = max((row["bucket"] for row in rows), default=-1) + 1  # fewer when it all happened within seconds
    counts = {kind: [0] * used for kind in KINDS}
    for row in rows:
        counts[row["kind"]][row["bucket"]] = row["n"]
    first, width = (rows[0]["first"], rows[0]["width"]) if rows else (None, 1.0)
    return Timeline(first, width, counts)
