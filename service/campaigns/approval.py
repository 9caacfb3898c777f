"""Approve a draft after its checks, for `einmal campaign approve` and POST …/approve: the one-click
unsubscribe it requires, its trial render (service/campaigns/preview.py), and the doctor's checks of its From
domain (service/accounts/doctor.py) where the account or the installation signs with DKIM. The doctor is asked
first (`asked`), with no connection held while it waits on DNS; approve then judges its report."""

import dataclasses
from collections.abc import Mapping
from email.utils import parseaddr
from typing import Any

import anyio
import asyncpg

from service import db
from service.accounts import account, doctor
from service.campaigns import preview
from service.campaigns.transitions import current_status, transition
from service.errors import Conflict, NotFound
from service.mail import from_rule, unsubscribe
from service.mail.mailing import Mailing


@dataclasses.dataclass(frozen=True)
class Tried:
    """A draft's trial render made before its approval, and the campaign's row it rendered."""

    campaign: dict[str, Any] | None
    trial: preview.Trial


async def tried_first(
    connect: doctor.Connect, *, mailing: Mailing, campaign_id: int, limiter: anyio.CapacityLimiter | None = None
) -> Tried | None:
    """The draft's trial render made before approve, with no connection held through it (the console bounds a
    block's database time, and a render is not the database's); None for a campaign that is no draft."""
    async with connect() as conn:
        if await current_status(conn, campaign_id=campaign_id) != "draft":
            return None
        found = await preview.sample(conn, campaign_id=campaign_id)
    return Tried(found.campaign, await preview.tried(found, mailing=mailing, limiter=limiter))


async def approve(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    campaign_id: int,
    force: bool = False,
    forcing: str,
    limiter: anyio.CapacityLimiter | None = None,
    report: doctor.Report | None = None,
    tried: Tried | None = None,
) -> preview.Trial:
    """Approve the campaign; returns its trial (the warnings to say). Conflict when this process would send it
    without the one-click unsubscribe it requires (field unsubscribe), or when the trial render fails for
    every subscriber tried and not `force` (field force; `forcing`: how the caller's warning says it forced).
    A campaign that is no draft is left to the transition to refuse. `report`: what `asked` found of its From
    domain; `tried`: the trial `tried_first` made, taken when the campaign is still what it rendered (else
    Conflict), none made here."""
    found = preview.Trial()
    if await current_status(conn, campaign_id=campaign_id) == "draft":
        campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
        if campaign is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        unsubscribe.require_one_click(dict(campaign), mailing, Conflict, f"campaign {campaign_id} not approved")
        said = f"campaign {campaign_id} not approved: its From"  # a domain removed since it was made
        await from_rule.check(
            conn, mailing=mailing, account_id=campaign["account_id"], address=campaign["from_address"], said=said
        )
        if tried is None:
            found = await preview.trial(conn, mailing=mailing, campaign_id=campaign_id, limiter=limiter)
        elif tried.campaign == dict(campaign):
            found = tried.trial
        else:
            raise Conflict(f"campaign {campaign_id} not approved: it changed during its trial render; approve it again")
        if found.hopeless and not force:
            raise found.refusal(campaign_id)
        if said := await _doctor(conn, mailing, dict(campaign), report, force, forcing):
            found = dataclasses.replace(found, warnings=(*found.warnings, said))
    await transition(conn, verb="approve", campaign_id=campaign_id)
    return found


async def asked(
    connect: doctor.Connect, checkup: doctor.Checkup, *, campaign_id: int, bounded: bool = False
) -> doctor.Report | None:
    """What the doctor finds of the draft's From domain (kept EINMAL_DOCTOR_CACHE_SECONDS), asked before
    approve where the account or the installation signs with DKIM (an installation that signs nothing has set
    up no domain to check: it approves as before); None where it is not asked. A connection for each step:
    none is held while DNS is asked."""
    async with connect() as conn:
        campaign = await conn.fetchrow(*db.sql("campaign_for_render", campaign_id=campaign_id))
        if campaign is None or await current_status(conn, campaign_id=campaign_id) != "draft":
            return None
        identity = await doctor.identity_of(conn, account_id=campaign["account_id"])
    domain = parseaddr(campaign["from_address"])[1].rpartition("@")[2]
    if not domain or not doctor.signs(identity, checkup.mailing):
        return None
    return await doctor.checked(
        connect, checkup, account_id=campaign["account_id"], domain=domain, bounded=bounded, own=False
    )


async def _doctor(
    conn: asyncpg.Connection,
    mailing: Mailing,
    campaign: Mapping[str, Any],
    report: doctor.Report | None,
    force: bool,
    forcing: str,
) -> str:
    """Conflict naming the doctor's failing checks of the campaign's From domain (`report`, from `asked`),
    unless `force`: then the warning that says so. The one-click unsubscribe is judged above, by the
    campaign's own choice."""
    identity = await doctor.identity_of(conn, account_id=campaign["account_id"])
    domain = parseaddr(campaign["from_address"])[1].rpartition("@")[2]
    if not domain or not doctor.signs(identity, mailing):
        return ""
    if report is None or report.domain != doctor.a_label(domain):  # its From changed since: ask again
        raise Conflict(f"campaign {campaign['id']} not approved: its From changed while the doctor checked; try again")
    failing, unchecked = report.failing(skip=("unsubscribe",)), report.unchecked()
    if not failing and not unchecked:
        return ""
    name = await account.name_of(conn, account_id=campaign["account_id"])
    said = f"`einmal doctor --account {name} --domain {report.domain}` "
    if failing:
        said += (
            f"finds check{'s' * (len(failing) > 1)} {', '.join(str(n) for n in failing)} failing: "
            f"mail from {report.domain} may be rejected"
        )
    else:
        said += (
            f"could not check {', '.join(str(n) for n in unchecked)}: {_unanswered(report)}, "
            f"so mail from {report.domain} is not known to pass"
        )
    if not force:
        raise Conflict(
            f"campaign {campaign['id']} not approved: {said} (force approves it anyway)",
            code="force.doctor_failing",
            field="force",
        )
    return f"warning: approved with {forcing} although {said}"


def _unanswered(report: doctor.Report) -> str:
    """What DNS did not do, as the first unchecked finding says it ("no answer from DNS server X within N s")."""
    for f in report.findings:
        if f.severity == "unchecked" and "could not check: " in f.title:
            return f.title.partition("could not check: ")[2]
    return "DNS did not answer"
