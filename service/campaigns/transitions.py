"""A campaign's transitions: approve, pause, resume, cancel (docs/design.md#state-machines).

Every campaign transition is one compare-and-set UPDATE followed, in the same
transaction, by NOTIFY einmal_campaign, so every node reacts at once. When the
CAS moves nothing, the campaign is read once more only to say why. The command
line, the demo and the claimer (a campaign that cannot render pauses) all
transition through here (service/campaigns/approval.py adds approve's checks).
"""

import asyncpg

from service import db
from service.errors import Conflict, NotFound

# verb -> (query, the word printed on success)
TRANSITIONS = {
    "approve": ("campaign_approve", "approved"),
    "pause": ("campaign_pause", "paused"),
    "resume": ("campaign_resume", "resumed"),
    "cancel": ("campaign_cancel", "cancelled"),
}


async def current_status(conn: asyncpg.Connection, *, campaign_id: int) -> str:
    """The campaign's status; NotFound when there is no such campaign."""
    row = await conn.fetchrow(*db.sql("campaign_get", campaign_id=campaign_id))
    if row is None:
        raise NotFound(f"no campaign with id {campaign_id}")
    status: str = row["status"]
    return status


async def transition(conn: asyncpg.Connection, *, verb: str, campaign_id: int, reason: str = "by operator") -> None:
    """One CAS and its NOTIFY, in one transaction; Conflict saying why when refused, NotFound when there is
    no such campaign.
    A pause records ``reason``; `campaign status` shows it until the campaign is resumed. A resume
    starts the campaign's figures for its self-pause again from nothing."""
    query, _ = TRANSITIONS[verb]
    async with conn.transaction():
        given = {"reason": reason[:1000]} if verb == "pause" else {}
        moved = await conn.fetchval(*db.sql(query, campaign_id=campaign_id, **given))
        if moved is not None:
            if verb == "cancel":
                # a statement of its own, after the CAS took the campaign's lock, so that it
                # sees the rows a recipient build committed meanwhile
                await conn.execute(*db.sql("sends_cancel", campaign_id=campaign_id))
            if verb == "resume":
                # judged afresh from here: what paused it does not pause it again (service/campaigns/self_pause.py)
                await conn.execute(*db.sql("campaign_tallies_rebase", campaign_id=campaign_id))
            await conn.execute(*db.sql("campaign_notify", campaign_id=campaign_id))
            return
    status = await current_status(conn, campaign_id=campaign_id)
    raise Conflict(f"cannot {verb} campaign {campaign_id}: it is {status}")
