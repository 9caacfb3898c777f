"""/api/v1/suppressions: the mailboxes the key's account never mails again — list, add (PUT), remove."""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import ERRORS, Conn, Key
from service.subscribers import suppressions
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
    rows = await suppressions.page(conn, account_id=key.account_id, after=cursor, limit=limit + 1)
    page = [Suppression(mailbox=r.email_lower, reason=r.reason, created_at=r.created_at) for r in rows[:limit]]
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
    found, added = await suppressions.add(
        conn, account_id=key.account_id, email=email, reason=fields.reason, actor=f"api:key {key.id}"
    )
    response.status_code = 201 if added else 200
    return Suppression(mailbox=found.email_lower, reason=found.reason, created_at=found.created_at)


@router.delete(
    "/{email}",
    operation_id="delete_suppression",
    status_code=204,
    summary="mail the mailbox again (running nodes: after a restart)",
    responses=ERRORS,
)
async def delete_suppression(email: Email, conn: Conn, key: Key) -> Response:
    await suppressions.remove(conn, account_id=key.account_id, email=email, actor=f"api:key {key.id}")
    return Response(status_code=204)
