"""/api/v1/suppressions: the mailboxes the key's account never mails again — list, add (PUT), remove."""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from service import db
from service.addresses import email_key
from service.api.deps import DB_SECONDS, ERRORS, Conn, Key, not_found
from service.subscribers.suppressions import check, suppress
from service.text import MAX_EMAIL, MAX_REASON

router = APIRouter(prefix="/suppressions", tags=["suppressions"])
Email = Annotated[str, Path(max_length=MAX_EMAIL, description="the address, in any spelling of its mailbox")]


class Suppression(BaseModel):
    mailbox: str = Field(
        description="the mailbox key the suppression is stored under "
        "(docs/guide/subscribers.md#how-addresses-are-compared)"
    )
    reason: str
    created_at: datetime


class SuppressionPage(BaseModel):
    suppressions: list[Suppression]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class SuppressionFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field("api", min_length=1, max_length=MAX_REASON)


@router.get("", operation_id="list_suppressions", summary="the account's suppressions, by mailbox")
async def list_suppressions(
    conn: Conn,
    key: Key,
    cursor: Annotated[str, Query(max_length=MAX_EMAIL)] = "",
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> SuppressionPage:
    rows = await conn.fetch(
        *db.sql("suppressions_of_account", account_id=key.account_id, after_key=cursor, limit=limit + 1),
        timeout=DB_SECONDS,
    )
    page = [Suppression(mailbox=r["email_lower"], reason=r["reason"], created_at=r["created_at"]) for r in rows[:limit]]
    return SuppressionPage(suppressions=page, next=page[-1].mailbox if len(rows) > limit else None)


@router.put(
    "/{email}",
    operation_id="put_suppression",
    summary="suppress the mailbox (201), or leave its suppression as it is (200)",
    responses={201: {"model": Suppression, "description": "suppressed now"}},
)
async def put_suppression(
    email: Email, fields: SuppressionFields, conn: Conn, key: Key, response: Response
) -> Suppression:
    [checked] = check([email], fields.reason)
    async with conn.transaction():
        added = await suppress(conn, key.account_id, [checked], fields.reason)
    response.status_code = 201 if added else 200
    row = await conn.fetchrow(
        *db.sql("suppression_get", account_id=key.account_id, email_key=email_key(checked)), timeout=DB_SECONDS
    )
    return Suppression(mailbox=row["email_lower"], reason=row["reason"], created_at=row["created_at"])


@router.delete(
    "/{email}",
    operation_id="delete_suppression",
    status_code=204,
    summary="mail the mailbox again (running nodes: after a restart)",
    responses=ERRORS,
)
async def delete_suppression(email: Email, conn: Conn, key: Key) -> Response:
    removed = await conn.fetch(
        *db.sql("suppression_delete", account_id=key.account_id, keys=[email_key(email)]), timeout=DB_SECONDS
    )
    if not removed:
        raise not_found("suppression")
    return Response(status_code=204)
