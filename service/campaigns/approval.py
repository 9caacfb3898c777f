"""Approve a draft after its checks, for `einmal campaign approve` and POST …/approve: the one-click
unsubscribe it requires, and its trial render (service/campaigns/preview.py)."""

import anyio
import asyncpg

from service import db, from_rule
from service.campaigns import preview
from service.campaigns.transitions import current_status, transition
from service.errors import Conflict, NotFound
from service.mail import unsubscribe
from service.settings import Settings


async def approve(
    conn: asyncpg.Connection,
    *,
    settings: Settings,
    campaign_id: int,
    force: bool = False,
    explicitly: str = "--no-unsubscribe",
    forcing: str = "--force",
    limiter: anyio.CapacityLimiter | None = None,
) -> preview.Trial:
    """Approve the campaign; returns its trial (the warnings to say). Conflict when this process would send it
    without the one-click unsubscribe it requires (`explicitly`: how the caller says it may go without), or
    when the trial render fails for every subscriber tried and not `force` (`forcing`: how the caller says
    that). A campaign that is no draft is left to the transition to refuse."""
    found = preview.Trial()
    if await current_status(conn, campaign_id=campaign_id) == "draft":
        campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
        if campaign is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        if reason := unsubscribe.without_one_click(dict(campaign), settings, explicitly):
            raise Conflict(f"campaign {campaign_id} not approved: {reason}")
        said = f"campaign {campaign_id} not approved: its From"  # a domain removed since it was made
        await from_rule.check(conn, account_id=campaign["account_id"], address=campaign["from_address"], said=said)
        found = await preview.trial(conn, settings=settings, campaign_id=campaign_id, limiter=limiter)
        if found.hopeless and not force:
            raise Conflict(found.refusal(campaign_id, forcing))
    await transition(conn, verb="approve", campaign_id=campaign_id)
    return found
