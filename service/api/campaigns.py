"""/api/v1/campaigns: the key's account's campaigns — list, create a draft, status (the counts of
`einmal campaign status --json`), and the transitions approve, pause, resume, cancel (docs/design.md#state-machines).

Create, change (service/api/drafts.py) and approve check what `einmal campaign create` and `approve` check:
a bulk campaign is refused where this process's settings give no one-click unsubscribe, unless it says
`"unsubscribe": false`; the campaign is rendered for a sample of its subscribers and the answer's `warnings`
say what the trial found; approve refuses (409) one that fails for every subscriber tried, unless `force`."""

import typing
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.accounts import replies
from service.api.deps import (
    CONFLICT,
    DB_SECONDS,
    ERRORS,
    FIXES,
    CheckupConfig,
    Conn,
    Cursor,
    IdempotencyKey,
    Key,
    KeyAlone,
    MailingConfig,
    checkout,
    connected,
    renders,
)
from service.campaigns import approval, clicks, drafts, fields, listing, opens, preview, status, transitions
from service.campaigns.fields import MAX_CAMPAIGN_NAME, MAX_FROM, MAX_SUBJECT
from service.engagement import counts

router = APIRouter(prefix="/campaigns", tags=["campaigns"])
Status = Literal["draft", "approved", "sending", "paused", "sent", "cancelled"]
Verb = Literal["approve", "pause", "resume", "cancel"]
CampaignId = Annotated[int, Path(ge=1, le=2**63 - 1)]
MAX_BODY_TEXT = 60_000  # a body is also bounded by the request's 64 KiB
UNSUBSCRIBE = (
    "false: it may go out without a one-click unsubscribe (RFC 8058) from a node whose "
    "EINMAL_UNSUBSCRIBE_URL and EINMAL_UNSUBSCRIBE_SECRET are not set; Gmail and Yahoo require one of "
    "bulk mail. true (the default): such a node pauses it, and create and approve refuse it where "
    "this server has none"
)
WARNINGS = (
    "what the trial render found: the campaign rendered for a sample of its lists' subscribers, its "
    "unsubscribe; empty when nothing"
)


class Campaign(BaseModel):
    id: int
    name: str
    subject: str
    status: Status
    scheduled_for: datetime | None = Field(
        description="when it may start; null for a draft given no time: it starts when approved"
    )
    pause_reason: str | None
    created_at: datetime
    unsubscribe: bool = Field(description='false: made with `"unsubscribe": false` (--no-unsubscribe)')
    local_time: str | None = Field(
        None, description='"HH:MM": each message goes out at that time in its recipient\'s time zone; null: at once'
    )


class CheckedCampaign(Campaign):
    """A campaign as created or changed, with what its trial render found."""

    warnings: list[str] = Field(description=WARNINGS)


class CampaignPage(BaseModel):
    campaigns: list[Campaign]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class Draft(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field(min_length=1, max_length=MAX_CAMPAIGN_NAME)
    subject: str = Field(min_length=1, max_length=MAX_SUBJECT, description="a template, like the bodies")
    from_address: str = Field(alias="from", min_length=1, max_length=MAX_FROM)
    text: str = Field(min_length=1, max_length=MAX_BODY_TEXT, description="the text body's template")
    html: str | None = Field(None, max_length=MAX_BODY_TEXT, description="the HTML body's template")
    lists: list[Annotated[str, Field(max_length=200)]] = Field(
        default_factory=list,
        max_length=50,
        description="default: the list `default`; with a segment, any of the account's lists",
    )
    segment: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="a segment of the account (GET /segments): only those its rule takes, from its lists; the "
        "campaign keeps the rule as it is now",
    )
    at: datetime | None = Field(
        None, description="when to start once approved (with its time zone); absent: at approval"
    )
    reply_to: str | None = Field(None, max_length=MAX_FROM)
    language: str | None = Field(
        None,
        max_length=20,
        description="its unsubscribe page's language, e.g. en, "
        "de; absent: the account's at creation, kept "
        "when the account's changes",
    )
    unsubscribe: bool = Field(True, description=UNSUBSCRIBE)
    track_clicks: bool = Field(
        False,
        description="true: its links lead through this server's /c/ (EINMAL_CLICK_URL), which records each click, "
        "tagged a person's or a machine's (docs/guide/click-tracking.md)",
    )
    local_time: str | None = Field(
        None,
        max_length=5,
        description='"HH:MM", e.g. "09:00": each message goes out at that time in its recipient\'s time zone '
        "(the subscriber's `time_zone` attribute, else the account's), the first such moment from the start; "
        "absent: at once (docs/guide/campaigns.md#local-send-times)",
    )
    track_opens: bool | None = Field(
        None,
        description="true: its HTML body carries a pixel from this server's /c/o/ (EINMAL_CLICK_URL), which records "
        "each open, tagged a person's or a machine's (docs/guide/click-tracking.md); absent: the account's default",
    )


class Counted(BaseModel):
    reply: str
    count: int


class PausedDomain(BaseModel):
    domain: str
    until: str
    reply: str
    queued: int


# what `einmal campaign status --json` prints. Not CampaignStatus: openapi-python-client names the enum of
# Campaign.status so, and two schemas of one name make it drop Campaign and CampaignPage
class CampaignProgress(BaseModel):
    id: int
    status: Status
    total: int
    counts: dict[str, int] = Field(description="send rows per state: queued, claimed, sending, sent, …")
    scheduled_for: datetime | None
    started_at: datetime | None
    pause_reason: str | None
    bounced: int
    soft_bounced: int
    unclassified: int
    complained: int
    reasons: dict[str, int]
    paused_domains: list[PausedDomain]
    failures: list[Counted]
    unsubscribed: int = Field(description="recipients who pressed the campaign's one-click unsubscribe link")
    recipients_estimate: int | None = Field(
        description="a campaign not started yet: the recipients its build would "
        "take now (confirmed members of its lists, not suppressed); "
        "null once started"
    )
    nodes_running: int = Field(description="nodes alive now (a recent heartbeat); with none, nothing is sent")
    next_step: str | None = Field(
        description="what the operator must do for the campaign to go on: decide "
        "messages in doubt, start a node; null when nothing"
    )
    unsubscribe: bool = Field(description='false: made with `"unsubscribe": false` (--no-unsubscribe)')
    local_time: str | None = Field(
        None, description='"HH:MM": each message goes out at that time in its recipient\'s time zone; null: at once'
    )
    waiting_for_local_time: int = Field(
        0, description="rows queued for their first attempt whose local time has not come yet"
    )
    next_due: datetime | None = Field(None, description="when the next of those rows is due")
    time_zone_fallbacks: int = Field(
        0,
        description="rows given the account's time zone because their subscriber's `time_zone` attribute named "
        "no time zone PostgreSQL knows",
    )


class ApprovedCampaign(CampaignProgress):
    """A campaign as approved, with what its trial render found."""

    warnings: list[str] = Field(description=WARNINGS)


async def own(conn, key, campaign_id: int) -> None:
    """404 unless the campaign is the key's account's."""
    await listing.owned(conn, account_id=key.account_id, campaign_id=campaign_id, timeout=DB_SECONDS)


async def audited(conn, key: Key, verb: str, campaign_id: int) -> None:
    """The audit log's line of a transition the key made (service/audit/)."""
    await audit.by_key(conn, key, f"campaign.{verb}", f"campaign {campaign_id}")


async def progress(conn, key: Key, campaign_id: int) -> dict[str, Any]:
    """The campaign's status as `einmal campaign status --json` prints it, its replies as the key's account is
    shown them (service/accounts/replies.py)."""
    found = (await status.snapshot(conn, campaign_id=campaign_id)).as_json()
    mine = await replies.own_relays(conn, account_id=key.account_id)
    failures: dict[str, int] = {}
    for f in found["failures"]:
        said = replies.shown(f["reply"], own_relays=mine) or ""
        failures[said] = failures.get(said, 0) + f["count"]
    paused = [{**d, "reply": replies.codes(d["reply"]) if d["reply"] else ""} for d in found["paused_domains"]]
    return {**found, "failures": [{"reply": r, "count": n} for r, n in failures.items()], "paused_domains": paused}


@router.get("", operation_id="list_campaigns", summary="the account's campaigns, newest first")
async def list_campaigns(
    conn: Conn,
    key: Key,
    status: Status | None = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> CampaignPage:
    before = int(cursor) if cursor else 2**63 - 1
    found = await listing.of_account(
        conn, account_id=key.account_id, before=before, status=status, limit=limit + 1, timeout=DB_SECONDS
    )
    page = [Campaign(**asdict(c)) for c in found[:limit]]
    return CampaignPage(campaigns=page, next=str(page[-1].id) if len(found) > limit else None)


@router.post("", operation_id="create_campaign", status_code=201, summary="create a draft; approve it to send")
async def create_campaign(
    draft: Draft, request: Request, key: KeyAlone, mailing: MailingConfig, idempotency_key: IdempotencyKey = None
) -> CheckedCampaign:
    async with renders(request, key.account_id) as threads:
        asked = draft.model_dump()
        segment = asked.pop("segment")
        if segment is not None and not asked["lists"]:
            del asked["lists"]  # a segment alone: through any of the account's lists, not the list `default`
        given = await fields.checked(asked, limiter=threads)  # no connection taken yet
        async with connected(request) as conn:
            created = await drafts.create(
                conn,
                mailing=mailing,
                account_id=key.account_id,
                lists=given.pop("lists", []),
                segment=segment,
                limiter=threads,
                unsubscribe_required=given.pop("unsubscribe"),
                timeout=DB_SECONDS,
                **given,
            )
            # its line follows the draft's transaction, not in it: the insert attached the campaign's partition
            # of einmal.sends, which locks einmal.campaigns, subscribers and accounts against every account's
            # writes until it commits; held open through the trial render after it, it would stall them all
            await audited(conn, key, "create", created.id)
            return await with_trial(conn, key, created.id, created.trial)


async def with_trial(conn, key, campaign_id: int, trial: preview.Trial) -> CheckedCampaign:
    """The campaign and what its trial render found."""
    found = await listing.one(conn, account_id=key.account_id, campaign_id=campaign_id, timeout=DB_SECONDS)
    return CheckedCampaign(**asdict(found), warnings=list(trial.warnings))


@router.get(
    "/{campaign_id}",
    operation_id="get_campaign",
    summary="counts per send state, what came back, why it is paused",
    responses=ERRORS,
)
async def get_campaign(campaign_id: CampaignId, conn: Conn, key: Key) -> CampaignProgress:
    await own(conn, key, campaign_id)
    return CampaignProgress(**await progress(conn, key, campaign_id))


@router.post(
    "/{campaign_id}/approve",
    operation_id="approve_campaign",
    summary="approve the campaign (409 when its state forbids, when this server would send it without the "
    "one-click unsubscribe it requires, when it renders for none of the subscribers tried, or when the doctor "
    "finds a check of its From domain failing)",
    responses=CONFLICT,
)
async def approve_campaign(
    campaign_id: CampaignId,
    request: Request,
    key: KeyAlone,
    checkup: CheckupConfig,
    force: Annotated[
        bool,
        Query(
            description="approve even if its trial render fails for every subscriber tried, or the doctor "
            "(GET /api/v1/doctor) finds a check of its From domain failing"
        ),
    ] = False,
    idempotency_key: IdempotencyKey = None,
) -> ApprovedCampaign:
    connect = checkout(request)
    async with connect() as conn:
        await own(conn, key, campaign_id)
    report = await approval.asked(connect, checkup, campaign_id=campaign_id, bounded=True)  # no connection held
    async with renders(request, key.account_id) as threads, connect() as conn:
        async with conn.transaction():  # the approval and its line of the audit log together
            found = await approval.approve(
                conn,
                mailing=checkup.mailing,
                campaign_id=campaign_id,
                force=force,
                forcing=FIXES["force"],
                limiter=threads,
                report=report,
            )
            await audited(conn, key, "approve", campaign_id)
        return ApprovedCampaign(**await progress(conn, key, campaign_id), warnings=list(found.warnings))


class ClickCount(BaseModel):
    total: int = Field(description="clicks")
    unique: int = Field(description="recipients who clicked")


class LinkClicks(BaseModel):
    link: int = Field(description="its place among the template's links, from 1")
    url: str
    all: ClickCount
    people: ClickCount = Field(description="clicks tagged `human`")
    machines: ClickCount = Field(description="clicks tagged `machine`: scanners, previews, prefetches")


class CampaignClicks(BaseModel):
    campaign_id: int
    tracked: bool = Field(description='made with "track_clicks": true')
    all: ClickCount
    people: ClickCount
    machines: ClickCount
    hidden: ClickCount = Field(description="clicks of the hidden link no person clicks (among the machines')")
    links: list[LinkClicks]


@router.get(
    "/{campaign_id}/clicks",
    operation_id="get_campaign_clicks",
    summary="its clicks, a person's and a machine's, total and unique, per link",
    responses=ERRORS,
)
async def campaign_clicks(campaign_id: CampaignId, conn: Conn, key: Key) -> CampaignClicks:
    await own(conn, key, campaign_id)
    return CampaignClicks(**asdict(await clicks.of_campaign(conn, campaign_id=campaign_id, timeout=DB_SECONDS)))


class CampaignOpens(BaseModel):
    campaign_id: int
    tracked: bool = Field(description='made with "track_opens": true (or by its account\'s default)')
    all: ClickCount = Field(description="opens; unique: recipients who opened")
    people: ClickCount = Field(description="opens tagged `human`")
    machines: ClickCount = Field(description="opens tagged `machine`: Apple's proxy, scanners, prefetches")


@router.get(
    "/{campaign_id}/opens",
    operation_id="get_campaign_opens",
    summary="its opens, a person's and a machine's, total and unique",
    responses=ERRORS,
)
async def campaign_opens(campaign_id: CampaignId, conn: Conn, key: Key) -> CampaignOpens:
    await own(conn, key, campaign_id)
    return CampaignOpens(**asdict(await opens.of_campaign(conn, campaign_id=campaign_id, timeout=DB_SECONDS)))


class Engagement(BaseModel):
    delivered: int = Field(description="its messages answered 250 by the receiving server")
    bounced: int = Field(description="refused for an address reason when sent, or a hard bounce after")
    complained: int = Field(description="complaints (feedback loops) about its messages")
    unsubscribed: int = Field(description="one-click unsubscribes from its messages")
    clicks: CampaignClicks | None = Field(description="its links' clicks; null where links are not tracked")
    opens: CampaignOpens | None = Field(default=None, description="its opens; null where opens are not tracked")


class CampaignEngagement(Engagement):
    campaign_id: int


@router.get(
    "/{campaign_id}/stats",
    operation_id="get_campaign_stats",
    summary="its engagement: delivered, bounced, complained, unsubscribed, clicked, opened",
    responses=ERRORS,
)
async def campaign_stats(campaign_id: CampaignId, conn: Conn, key: Key) -> CampaignEngagement:
    await own(conn, key, campaign_id)
    return CampaignEngagement(**asdict(await counts.of_campaign(conn, campaign_id=campaign_id)))


def _mover(verb: str):
    async def move(
        campaign_id: CampaignId, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
    ) -> CampaignProgress:
        await own(conn, key, campaign_id)
        async with conn.transaction():
            await transitions.transition(conn, verb=verb, campaign_id=campaign_id, reason="by the API")
            await audited(conn, key, verb, campaign_id)
        return CampaignProgress(**await progress(conn, key, campaign_id))

    move.__name__ = f"{verb}_campaign"
    return move


# a route each, not /{campaign_id}/{verb}: a POST to another path under a campaign (…/preview) is a 405, and
# each transition is its own operation in the document
for _verb in typing.get_args(Verb)[1:]:  # approve: above
    router.post(
        f"/{{campaign_id}}/{_verb}",
        operation_id=f"{_verb}_campaign",
        summary=f"{_verb} the campaign (409 when its state forbids)",
        responses=CONFLICT,
    )(_mover(_verb))
