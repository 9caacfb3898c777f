"""The engagement of a campaign, of each step of a sequence, of a message template: `einmal campaign stats`,
`einmal sequence stats`, `einmal message template stats` and their routes of /api/v1."""

from dataclasses import dataclass
from typing import Any

import asyncpg

from service import db
from service.campaigns import clicks as campaign_clicks
from service.campaigns import opens as campaign_opens
from service.campaigns.clicks import Clicks
from service.campaigns.opens import Opens
from service.errors import NotFound


@dataclass(frozen=True)
class Engagement:
    delivered: int = 0  # answered 250 by the receiving server
    bounced: int = 0  # refused for an address reason when sent, or a hard bounce after
    complained: int = 0  # a complaint (feedback loop) about one of its messages
    unsubscribed: int = 0  # one-click unsubscribes from its messages
    # its links' clicks and its opens (None: its messages' links and opens are not tracked, a template's)
    clicks: Clicks | None = None
    opens: Opens | None = None


@dataclass(frozen=True)
class CampaignEngagement(Engagement):
    campaign_id: int = 0


@dataclass(frozen=True)
class StepEngagement(Engagement):
    position: int = 0
    campaign_id: int = 0
    subject: str = ""
    deleted: bool = False


@dataclass(frozen=True)
class SequenceEngagement:
    sequence_id: int
    name: str
    steps: list[StepEngagement]


@dataclass(frozen=True)
class TemplateEngagement(Engagement):
    template: str = ""


async def _counts(conn: asyncpg.Connection, account_id: int, subjects: list[str]) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        *db.sql("engagement_counts", account_id=account_id, subjects=subjects), timeout=db.DB_SECONDS
    )
    return [{k: r[k] for k in ("delivered", "bounced", "complained", "unsubscribed")} for r in rows]


async def of_campaign(conn: asyncpg.Connection, *, campaign_id: int) -> CampaignEngagement:
    """The campaign's (or step's) engagement; NotFound when there is none of that id."""
    tracked = await campaign_clicks.of_campaign(conn, campaign_id=campaign_id, timeout=db.DB_SECONDS)  # NotFound first
    account_id = await conn.fetchval(*db.sql("campaign_owner", campaign_id=campaign_id))
    (counts,) = await _counts(conn, account_id, [f"campaign:{campaign_id}"])
    opened = await campaign_opens.of_campaign(conn, campaign_id=campaign_id, timeout=db.DB_SECONDS)
    return CampaignEngagement(**counts, clicks=tracked, opens=opened, campaign_id=campaign_id)


async def of_sequence(
    conn: asyncpg.Connection, *, account_id: int, name: str | None = None, sequence_id: int | None = None
) -> SequenceEngagement:
    """Each step's engagement of the account's sequence named `name` (or of id `sequence_id`), deleted steps too;
    NotFound when it has none such."""
    rows = await conn.fetch(*db.sql("engagement_steps", account_id=account_id, name=name, sequence_id=sequence_id))
    if not rows:
        raise NotFound("no such sequence")
    steps = [r for r in rows if r["campaign_id"] is not None]
    counts = await _counts(conn, account_id, [f"campaign:{r['campaign_id']}" for r in steps])
    found = [
        StepEngagement(
            **c,
            clicks=await campaign_clicks.of_campaign(conn, campaign_id=r["campaign_id"], timeout=db.DB_SECONDS),
            opens=await campaign_opens.of_campaign(conn, campaign_id=r["campaign_id"], timeout=db.DB_SECONDS),
            position=r["position"],
            campaign_id=r["campaign_id"],
            subject=r["subject"],
            deleted=r["deleted"],
        )
        for r, c in zip(steps, counts, strict=True)
    ]
    return SequenceEngagement(rows[0]["sequence_id"], rows[0]["name"], found)


async def of_template(conn: asyncpg.Connection, *, account_id: int, name: str) -> TemplateEngagement:
    """The engagement of the messages made from the account's template `name` (while they were made from it: a
    template removed and added again goes on counting); NotFound when it has no such template and none of its
    messages was counted."""
    (counts,) = await _counts(conn, account_id, [f"template:{name}"])
    known = await conn.fetchval(*db.sql("message_template_get", account_id=account_id, template_name=name))
    if known is None and not any(counts.values()):
        raise NotFound("no such message template")
    return TemplateEngagement(**counts, template=name)
