"""/api/v1/campaigns/{id}: its failed rows queued again (`einmal campaign retry`), and its in-doubt rows —
messages whose answer was lost after the final dot (docs/design.md#in-doubt-bound) — listed and decided (`einmal
reconcile`). The campaign must be the key's account's (404 otherwise)."""

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from service.accounts import replies
from service.addresses import email_key
from service.api.campaigns import CampaignId, audited, own
from service.api.deps import CONFLICT, DB_SECONDS, ERRORS, Conn, IdempotencyKey, Key
from service.campaigns import rows
from service.smtp.reasons import Reason
from service.text import MAX_EMAIL

router = APIRouter(prefix="/campaigns", tags=["campaigns"])
MAX_CHOSEN = 1000


class Moved(BaseModel):
    moved: int = Field(description="the rows moved")
    reopened: bool = Field(description="whether the campaign, sent, is sending again")
    left: int = Field(
        description="a sequence step's rows of members who left its list since: settled as suppressed, not sent"
    )


class RetryFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Reason | None = Field(
        None, description="only the rows whose last reply has this reason (docs/guide/bounces.md); absent: all"
    )


class InDoubt(BaseModel):
    id: int
    email: str
    node: str | None = Field(description="the node whose SMTP transaction it was in")
    since: datetime = Field(description="when it became in doubt")
    attempts: int
    last_reply: str | None


class InDoubtRows(BaseModel):
    rows: list[InDoubt]


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["resend", "mark_sent"] = Field(
        description="resend: queued again (with the same Message-ID); mark_sent: counted as sent"
    )
    ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(
        [], max_length=MAX_CHOSEN, description="these rows only"
    )
    emails: list[Annotated[str, Field(max_length=MAX_EMAIL)]] = Field(
        [], max_length=MAX_CHOSEN, description="these addresses' rows only; with neither, every in-doubt row"
    )


@router.post(
    "/{campaign_id}/retry",
    operation_id="retry_campaign",
    summary="put its failed rows back in the queue (409 when it is cancelled)",
    responses=CONFLICT,
)
async def retry_campaign(
    campaign_id: CampaignId, fields: RetryFields, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> Moved:
    await own(conn, key, campaign_id)
    async with conn.transaction():
        done = await rows.retry_failed(conn, campaign_id=campaign_id, reason=fields.reason)
        await audited(conn, key, "retry", campaign_id)
    return Moved(moved=done.moved, reopened=done.reopened, left=done.left)


@router.get(
    "/{campaign_id}/in-doubt", operation_id="list_in_doubt", summary="its in-doubt rows, oldest first", responses=ERRORS
)
async def list_in_doubt(campaign_id: CampaignId, conn: Conn, key: Key) -> InDoubtRows:
    await own(conn, key, campaign_id)
    found = await rows.in_doubt(conn, campaign_id=campaign_id, timeout=DB_SECONDS)
    mine = await replies.own_relays(conn, account_id=key.account_id)
    return InDoubtRows(
        rows=[
            InDoubt(
                id=r.id,
                email=r.email,
                node=r.node,
                since=r.since,
                attempts=r.attempts,
                last_reply=replies.shown(r.last_reply, own_relays=mine),
            )
            for r in found
        ]
    )


@router.post(
    "/{campaign_id}/reconcile",
    operation_id="reconcile_campaign",
    summary="decide its in-doubt rows, all or those named (409 when one "
    "named is not in doubt, or a resend of a cancelled campaign; nothing decided)",
    responses=CONFLICT,
)
async def reconcile_campaign(
    campaign_id: CampaignId, decision: Decision, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> Moved:
    await own(conn, key, campaign_id)
    chosen = bool(decision.ids or decision.emails)
    keys = [email_key(e) for e in decision.emails]
    async with conn.transaction():
        done = await rows.decide(
            conn,
            campaign_id=campaign_id,
            resend=decision.decision == "resend",
            ids=decision.ids if chosen else None,
            keys=keys if chosen else None,
            addresses=decision.emails,
        )
        await audited(conn, key, f"reconcile.{decision.decision}", campaign_id)
    return Moved(moved=done.moved, reopened=done.reopened, left=done.left)
