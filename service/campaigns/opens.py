"""A campaign's opens (docs/design.md#click-tracking): total and unique recipients, a person's and a machine's:
`einmal campaign stats` and GET /api/v1/campaigns/{id}/opens. Counted as clicks are (service/campaigns/clicks.py)."""

from dataclasses import dataclass

import asyncpg

from service import db
from service.campaigns.clicks import KEYS, Count, Tally
from service.errors import NotFound


@dataclass(frozen=True)
class Opens(Tally):
    campaign_id: int = 0
    tracked: bool = False  # made with --track-opens (or by its account's default)


async def of_campaign(conn: asyncpg.Connection, *, campaign_id: int, timeout: float | None = None) -> Opens:
    rows = await conn.fetch(*db.sql("campaign_opens", campaign_id=campaign_id), timeout=timeout)
    if rows[0]["tracked"] is None:
        raise NotFound(f"no campaign {campaign_id}")
    counts = {KEYS[row["tag"]]: Count(row["total"], row["recipients"]) for row in rows}
    return Opens(**counts, campaign_id=campaign_id, tracked=rows[0]["tracked"])
