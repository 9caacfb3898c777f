"""Create a draft (`einmal campaign create`, POST /api/v1/campaigns, the demo) and change one while it is a
draft (PATCH /api/v1/campaigns/{id}): one compare-and-set UPDATE, so a campaign approved meanwhile is left
as it is."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

import anyio
import asyncpg

from service import db
from service.accounts.account import list_ids
from service.campaigns import preview
from service.campaigns.transitions import current_status
from service.errors import Conflict, Invalid
from service.mail import clicks, from_rule, unsubscribe
from service.mail.mailing import Mailing
from service.segments import segments


@dataclass(frozen=True)
class Created:
    id: int
    trial: preview.Trial  # what its trial render found


async def insert(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    name: str,
    subject: str,
    from_address: str,
    text: str,
    html: str | None,
    list_ids: list[int],
    at: datetime | None = None,
    reply_to: str | None = None,
    list_id: str | None = None,
    headers: Sequence[tuple[str, str]] = (),
    language: str | None = None,
    unsubscribe_required: bool = True,
    track_clicks: bool = False,
    track_opens: bool | None = None,
    segment: str | None = None,
    segment_rule: dict[str, Any] | None = None,
    local_time: time | None = None,
    timeout: float | None = None,
) -> int:
    """The new draft's id; its fields checked before (service/campaigns/fields.py); `segment` narrows its lists
    by `segment_rule`, the segment's rule kept as it is now; `local_time`: each row goes out at that time in its
    recipient's time zone (docs/guide/campaigns.md#local-send-times)."""
    async with conn.transaction():
        await conn.execute(*db.sql("campaign_partition_lock"), timeout=timeout)
        campaign_id: int = await conn.fetchval(
            *db.sql(
                "campaign_create",
                account_id=account_id,
                campaign_name=name,
                subject=subject,
                from_address=from_address,
                text=text,
                html=html,
                list_ids=list_ids,
                at=at,
                reply_to=reply_to,
                list_id=list_id,
                headers=json.dumps(list(headers)),
                language=language,
                unsubscribe=unsubscribe_required,
                track_clicks=track_clicks,
                track_opens=track_opens,
                segment=segment,
                segment_rule=json.dumps(segment_rule) if segment_rule is not None else None,
                local_time=local_time,
            ),
            timeout=timeout,
        )
    return campaign_id


async def draft(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    lists: list[str],
    segment: str | None = None,
    **fields: Any,
) -> int:
    """A new draft of the account on `lists` made of `fields` (insert's, checked before); its id. With
    `segment`, to those of them its rule takes (no lists: through any of the account's lists). Invalid when
    this process would send it without the one-click unsubscribe it requires, or for a segment the account does
    not have; ArgumentError for a From outside the account's domains (service/mail/from_rule.py)."""
    required = fields.get("unsubscribe_required", True)
    unsubscribe.require_one_click({"unsubscribe_required": required}, mailing, Invalid, "not created")
    for tracked in ("click", "open"):
        if fields.get(f"track_{tracked}s") and (lacking := clicks.missing(mailing)):
            raise Invalid(f"not created: {tracked} tracking needs {' and '.join(lacking)}, which this process has not")
    found = await list_ids(conn, account_id=account_id, lists=lists, timeout=fields.get("timeout"))
    rule = None
    if segment is not None:
        rule = await segments.rule_for_campaign(conn, account_id=account_id, name=segment)
        if not lists:
            found = await conn.fetchval(*db.sql("account_list_ids", account_id=account_id))
    await from_rule.check(conn, mailing=mailing, account_id=account_id, address=fields["from_address"], said="From")
    return await insert(conn, account_id=account_id, list_ids=found, segment=segment, segment_rule=rule, **fields)


async def create(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    lists: list[str],
    segment: str | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    **fields: Any,
) -> Created:
    """A new draft (draft()) and its trial render, in a worker thread (`limiter`: of a process that serves
    others)."""
    campaign_id = await draft(conn, mailing=mailing, account_id=account_id, lists=lists, segment=segment, **fields)
    return Created(campaign_id, await preview.trial(conn, mailing=mailing, campaign_id=campaign_id, limiter=limiter))


async def change(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    campaign_id: int,
    account_id: int,
    fields: dict[str, Any],
    limiter: anyio.CapacityLimiter | None = None,
    timeout: float | None = None,
) -> preview.Trial:
    """Change the draft's `fields` given (checked before, service/campaigns/fields.py checked), the others
    staying; its trial render. Invalid for a change that cannot be, Conflict once it is no draft."""
    if fields.get("unsubscribe"):
        unsubscribe.require_one_click({"unsubscribe_required": True}, mailing, Invalid, "not changed")
    if fields.get("from_address"):
        await from_rule.check(
            conn, mailing=mailing, account_id=account_id, address=fields["from_address"], said="From", timeout=timeout
        )
    lists = None
    if "lists" in fields:
        lists = await list_ids(conn, account_id=account_id, lists=fields["lists"], timeout=timeout)
    changed = await conn.fetchval(
        *db.sql(
            "campaign_draft_update",
            campaign_id=campaign_id,
            account_id=account_id,
            given=list(fields),
            campaign_name=fields.get("name"),
            subject=fields.get("subject"),
            from_address=fields.get("from_address"),
            text=fields.get("text"),
            html=fields.get("html"),
            list_ids=lists,
            at=fields.get("at"),
            reply_to=fields.get("reply_to"),
            language=fields.get("language"),
            unsubscribe=fields.get("unsubscribe"),
            local_time=fields.get("local_time"),
        ),
        timeout=timeout,
    )
    if changed is None:
        status = await current_status(conn, campaign_id=campaign_id)
        raise Conflict(f"campaign {campaign_id} is {status}: only a draft can be changed")
    return await preview.trial(conn, mailing=mailing, campaign_id=campaign_id, limiter=limiter)
