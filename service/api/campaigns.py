"""/api/v1/campaigns: the key's account's campaigns — list, create a draft, status (the counts of
`einmal campaign status --json`), and the transitions approve, pause, resume, cancel (docs/design.md#state-machines).

Create, change (service/api/drafts.py) and approve check what `einmal campaign create` and `approve` check:
a bulk campaign is refused where this process's settings give no one-click unsubscribe, unless it says
`"unsubscribe": false`; the campaign is rendered for a sample of its subscribers and the answer's `warnings`
say what the trial found; approve refuses (409) one that fails for every subscriber tried, unless `force`."""

import typing
from datetime import datetime
from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, HTTPException, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from service import db
from service.api.deps import (
    CONFLICT,
    DB_SECONDS,
    ERRORS,
    RENDERS,
    Conn,
    Cursor,
    IdempotencyKey,
    Key,
    limiter,
    not_found,
)
from service.cli import campaign_status, campaign_view
from service.cli.campaigns import (
    MAX_CAMPAIGN_NAME,
    MAX_FROM,
    MAX_SUBJECT,
    approve,
    body_text,
    check_templates,
    from_address,
    list_names,
    one_line,
    resolve,
)
from service.errors import UsageError
from service.mail import unsubscribe
from service.transitions import transition
from service.web import texts

router = APIRouter(prefix="/campaigns", tags=["campaigns"])
Status = Literal["draft", "approved", "sending", "paused", "sent", "cancelled"]
Verb = Literal["approve", "pause", "resume", "cancel"]
CampaignId = Annotated[int, Path(ge=1, le=2**63 - 1)]
MAX_BODY_TEXT = 60_000  # a body is also bounded by the request's 64 KiB
EXPLICITLY = '"unsubscribe": false'  # how a request says a campaign may go without a one-click unsubscribe
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
        default_factory=list, max_length=50, description="default: the list `default`"
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


class ApprovedCampaign(CampaignProgress):
    """A campaign as approved, with what its trial render found."""

    warnings: list[str] = Field(description=WARNINGS)


async def own(conn, key, campaign_id: int) -> None:
    owner = await conn.fetchrow(db.query("api_campaign_owner"), campaign_id, timeout=DB_SECONDS)
    if owner is None or owner["account_id"] != key.account_id:
        raise not_found("campaign")


@router.get("", operation_id="list_campaigns", summary="the account's campaigns, newest first")
async def list_campaigns(
    conn: Conn,
    key: Key,
    status: Status | None = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> CampaignPage:
    before = int(cursor) if cursor else 2**63 - 1
    rows = await conn.fetch(db.query("api_campaigns"), key.account_id, before, status, limit + 1, timeout=DB_SECONDS)
    page = [Campaign(**dict(r)) for r in rows[:limit]]
    return CampaignPage(campaigns=page, next=str(page[-1].id) if len(rows) > limit else None)


@router.post("", operation_id="create_campaign", status_code=201, summary="create a draft; approve it to send")
async def create_campaign(
    draft: Draft, request: Request, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> CheckedCampaign:
    settings = request.app.state.settings
    try:
        fields = await checked(draft.model_dump())
        if reason := unsubscribe.without_one_click({"unsubscribe_required": draft.unsubscribe}, settings, EXPLICITLY):
            raise UsageError(f"not created: {reason}")
        account_id, list_ids = await resolve(conn, await account_name(conn, key), fields["lists"])
    except UsageError as exc:
        raise HTTPException(422, str(exc)) from None
    campaign_id = await conn.fetchval(
        db.query("campaign_create"),
        account_id,
        fields["name"],
        fields["subject"],
        fields["from_address"],
        fields["text"],
        fields["html"],
        list_ids,
        fields["at"],
        fields["reply_to"],
        None,
        "[]",
        fields["language"],
        draft.unsubscribe,
        timeout=DB_SECONDS,
    )
    return await with_trial(request, conn, key, campaign_id)


async def with_trial(request: Request, conn, key, campaign_id: int) -> CheckedCampaign:
    """The campaign and what its trial render finds, rendered in a worker thread, RENDERS at a time."""
    found = await campaign_view.trial(
        conn, request.app.state.settings, campaign_id, limiter(request, "renders", RENDERS)
    )
    return CheckedCampaign(**(await one(conn, key, campaign_id)).model_dump(), warnings=list(found.warnings))


async def checked(fields: dict) -> dict:
    """The fields of a Draft that are given, checked as `einmal campaign create` checks its options (the
    templates compiled in the sandbox, in a worker thread); None stays None. UsageError for the first that
    is not right."""
    rules = {
        "name": lambda v: one_line(v, "name", MAX_CAMPAIGN_NAME),
        "subject": lambda v: one_line(v, "subject", MAX_SUBJECT),
        "from_address": lambda v: from_address(v, "from"),
        "reply_to": lambda v: from_address(v, "reply_to"),
        "text": lambda v: body_text(v, "text"),
        "html": lambda v: body_text(v, "html"),
        "at": _aware,
        "lists": list_names,
        "language": lambda v: texts.checked(v, "language"),
        "unsubscribe": bool,
    }
    fields = {name: rules[name](value) if value is not None else None for name, value in fields.items()}
    await anyio.to_thread.run_sync(check_templates, fields.get("subject"), fields.get("text"), fields.get("html"))
    return fields


def _aware(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise UsageError("at: give its time zone, e.g. 2027-01-01T09:00:00+01:00")
    return at


async def account_name(conn, key) -> str:
    return await conn.fetchval(db.query("account_name"), key.account_id, timeout=DB_SECONDS)


async def one(conn, key, campaign_id: int) -> Campaign:
    [row] = await conn.fetch(db.query("api_campaigns"), key.account_id, campaign_id + 1, None, 1, timeout=DB_SECONDS)
    return Campaign(**dict(row))


@router.get(
    "/{campaign_id}",
    operation_id="get_campaign",
    summary="counts per send state, what came back, why it is paused",
    responses=ERRORS,
)
async def get_campaign(campaign_id: CampaignId, conn: Conn, key: Key) -> CampaignProgress:
    await own(conn, key, campaign_id)
    snapshot = await campaign_status.fetch(conn, campaign_id)
    return CampaignProgress(**snapshot.as_json())


@router.post(
    "/{campaign_id}/approve",
    operation_id="approve_campaign",
    summary="approve the campaign (409 when its state forbids, when this server would send it without the "
    "one-click unsubscribe it requires, or when it renders for none of the subscribers tried)",
    responses=CONFLICT,
)
async def approve_campaign(
    campaign_id: CampaignId,
    request: Request,
    conn: Conn,
    key: Key,
    force: Annotated[
        bool, Query(description="approve even if its trial render fails for every subscriber tried")
    ] = False,
    idempotency_key: IdempotencyKey = None,
) -> ApprovedCampaign:
    await own(conn, key, campaign_id)
    try:
        found = await approve(
            conn,
            request.app.state.settings,
            campaign_id,
            force,
            EXPLICITLY,
            "?force=true",
            limiter(request, "renders", RENDERS),
        )
    except UsageError as exc:
        raise HTTPException(409, str(exc)) from None
    return ApprovedCampaign(**(await campaign_status.fetch(conn, campaign_id)).as_json(), warnings=list(found.warnings))


def _mover(verb: str):
    async def move(
        campaign_id: CampaignId, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
    ) -> CampaignProgress:
        await own(conn, key, campaign_id)
        try:
            await transition(conn, verb, campaign_id, reason="by the API")
        except UsageError as exc:
            raise HTTPException(409, str(exc)) from None
        return CampaignProgress(**(await campaign_status.fetch(conn, campaign_id)).as_json())

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
