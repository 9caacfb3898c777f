"""A campaign's clicks (docs/design.md#click-tracking): total and unique recipients, a person's and a machine's,
per link: `einmal campaign stats` and GET /api/v1/campaigns/{id}/clicks."""

from dataclasses import dataclass, field

import asyncpg

from service import db
from service.errors import NotFound


@dataclass(frozen=True)
class Count:
    total: int = 0  # clicks (opens)
    unique: int = 0  # recipients who clicked (opened)


@dataclass(frozen=True)
class Tally:
    """Clicks (or opens, service/campaigns/opens.py): all of them, those of people (`human`) and of machines
    (`machine`)."""

    all: Count = Count()
    people: Count = Count()
    machines: Count = Count()


@dataclass(frozen=True)
class LinkClicks(Tally):
    link: int = 0  # its place among the template's links
    url: str = ""


@dataclass(frozen=True)
class Clicks(Tally):
    campaign_id: int = 0
    tracked: bool = False  # made with --track-clicks
    hidden: Count = Count()  # of the hidden link, which no person clicks (counted among the machines')
    links: list[LinkClicks] = field(default_factory=list)


KEYS = {None: "all", "human": "people", "machine": "machines"}  # a row's tag: its count's name


async def of_campaign(conn: asyncpg.Connection, *, campaign_id: int, timeout: float | None = None) -> Clicks:
    rows = await conn.fetch(*db.sql("campaign_clicks", campaign_id=campaign_id), timeout=timeout)
    overall: dict[str, Count] = {}
    per_link: dict[int, dict[str, Count]] = {}
    urls: dict[int, str] = {}
    for row in rows:
        count = Count(row["total"], row["recipients"])
        if row["link"] is None:
            overall[KEYS[row["tag"]]] = count
        else:
            per_link.setdefault(row["link"], {})[KEYS[row["tag"]]] = count
            urls[row["link"]] = row["url"]
    if rows[0]["tracked"] is None:
        raise NotFound(f"no campaign {campaign_id}")
    tracked = rows[0]["tracked"]
    hidden = per_link.pop(0, {}).get("all", Count())
    links = [LinkClicks(**counts, link=link, url=urls[link]) for link, counts in sorted(per_link.items())]
    return Clicks(**overall, campaign_id=campaign_id, tracked=tracked, hidden=hidden, links=links)
