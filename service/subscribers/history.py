"""What einmal sent a subscriber: its send rows in its account's newest campaigns (campaigns, transactional
messages, sequence steps), each with its bounces and complaints and its clicks, as the console's subscriber page
shows them. Each campaign's row is found through the campaign's own index, so the history of a subscriber
costs one index probe per campaign looked at, however many subscribers and send rows there are."""

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from service import db
from service.db import DB_SECONDS

CAMPAIGNS = 100  # the account's newest campaigns looked at


@dataclass(frozen=True)
class Sent:
    campaign_id: int
    name: str
    kind: str  # campaign, confirmation, message or step
    status: str  # the send row's: queued, sent, failed, suppressed, in_doubt, …
    sent_at: datetime | None
    updated_at: datetime
    bounces: list[str]  # the kinds of its bounces, oldest first: hard, soft, complaint, unclassified
    clicks: int  # a person's clicks (machines' not counted)


async def of_subscriber(
    conn: asyncpg.Connection, *, account_id: int, subscriber_id: int, campaigns: int = CAMPAIGNS
) -> list[Sent]:
    """The subscriber's send rows in the account's `campaigns` newest campaigns, newest first."""
    rows = await conn.fetch(
        *db.sql("subscriber_history", account_id=account_id, subscriber_id=subscriber_id, campaigns=campaigns),
        timeout=DB_SECONDS,
    )
    return [Sent(**{**dict(r), "bounces": list(r["bounces"])}) for r in rows]
