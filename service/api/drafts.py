"""PATCH /api/v1/campaigns/{id}: change what `einmal campaign create` set, while the campaign is a draft.

Each field given is checked as at creation (service/campaigns/fields.py checked: the templates compiled in the
sandbox); a field left out stays as it was; null clears what may be absent (html, reply_to, language) or
makes `at` "at approval". One compare-and-set UPDATE: a campaign approved meanwhile is 409, unchanged. The
answer says what the trial render of the changed draft found (`warnings`), as create's does."""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from service.api.campaigns import (
    MAX_BODY_TEXT,
    UNSUBSCRIBE,
    CampaignId,
    CheckedCampaign,
    audited,
    own,
    with_trial,
)
from service.api.deps import CONFLICT, DB_SECONDS, LEFT_OUT, Conn, Key, MailingConfig, renders
from service.campaigns import drafts, fields
from service.campaigns.fields import MAX_CAMPAIGN_NAME, MAX_FROM, MAX_SUBJECT

router = APIRouter(prefix="/campaigns", tags=["campaigns"])


class DraftChanges(BaseModel):
    """The fields of a draft to change; those left out stay as they are."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field(LEFT_OUT, min_length=1, max_length=MAX_CAMPAIGN_NAME)
    subject: str = Field(LEFT_OUT, min_length=1, max_length=MAX_SUBJECT, description="a template, like the bodies")
    from_address: str = Field(LEFT_OUT, alias="from", min_length=1, max_length=MAX_FROM)
    text: str = Field(LEFT_OUT, min_length=1, max_length=MAX_BODY_TEXT, description="the text body's template")
    html: str | None = Field(None, max_length=MAX_BODY_TEXT, description="the HTML body's template; null: none")
    lists: list[Annotated[str, Field(max_length=200)]] = Field(
        LEFT_OUT, max_length=50, description="[]: the list `default`"
    )
    at: datetime | None = Field(None, description="when to start once approved; null: at approval")
    reply_to: str | None = Field(None, max_length=MAX_FROM, description="null: none")
    language: str | None = Field(None, max_length=20, description="null: the account's now")
    unsubscribe: bool = Field(LEFT_OUT, description=UNSUBSCRIBE)
    local_time: str | None = Field(
        None, max_length=5, description='"HH:MM" in each recipient\'s time zone; null: at once'
    )


@router.patch(
    "/{campaign_id}",
    operation_id="change_draft",
    responses=CONFLICT,
    summary="change a draft (409 once it is approved)",
)
async def edit_draft(
    campaign_id: CampaignId, changes: DraftChanges, request: Request, conn: Conn, key: Key, mailing: MailingConfig
) -> CheckedCampaign:
    await own(conn, key, campaign_id)
    async with renders(request, key.account_id) as threads, conn.transaction():
        found = await drafts.change(
            conn,
            mailing=mailing,
            campaign_id=campaign_id,
            account_id=key.account_id,
            fields=await fields.checked(changes.model_dump(include=changes.model_fields_set), limiter=threads),
            limiter=threads,
            timeout=DB_SECONDS,
        )
        await audited(conn, key, "change", campaign_id)
    return await with_trial(conn, key, campaign_id, found)
