"""/api/v1/subscribers: list with a cursor, get by any spelling of the mailbox, create or update (PUT),
erase (DELETE, the erasure of `einmal subscribers delete`)."""

import json
from datetime import datetime
from typing import Annotated, Literal

import asyncpg
from fastapi import APIRouter, Body, HTTPException, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from service import db
from service.addresses import address_problem, email_key
from service.api.deps import CONFLICT, DB_SECONDS, ERRORS, Conn, Cursor, Key, not_found
from service.subscribers import erasure
from service.text import MAX_ATTRIBUTE, MAX_EMAIL, MAX_NAME, unsafe_text

LOCK_SECONDS = 5.0  # the most an upsert waits for an import into its account to end (then 503)
# what is true of a subscriber now (einmal.subscriber_state, migration 0105): its mailbox's suppression by
# reason first, then `unconfirmed` when it has only sign-ups awaiting confirmation
Status = Literal["confirmed", "unconfirmed", "unsubscribed", "bounced", "complained", "suppressed"]
OnList = Annotated[
    str | None, Query(alias="list", max_length=200, description="only the confirmed members of this list")
]
Email = Annotated[str, Path(max_length=MAX_EMAIL, description="the address, in any spelling of its mailbox")]


class Subscriber(BaseModel):
    id: int
    email: str
    name: str
    status: Status
    attributes: dict[str, str]
    lists: list[str] = Field(description="the lists it is a confirmed member of: the ones campaigns reach")
    unconfirmed_lists: list[str] = Field(description="its sign-ups awaiting confirmation (double opt-in)")
    suppressed: str | None = Field(description="why the mailbox is suppressed for the account, if it is")
    created_at: datetime


class SubscriberPage(BaseModel):
    subscribers: list[Subscriber]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class SubscriberFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=MAX_NAME, description="unchanged when absent")
    attributes: dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=MAX_ATTRIBUTE)]] | None = (
        Field(None, max_length=200, description="merged into the stored ones: a key given replaces its value")
    )


def _subscriber(row: asyncpg.Record) -> Subscriber:
    return Subscriber(
        **{
            **dict(row),
            "attributes": json.loads(row["attributes"]),
            "lists": list(row["lists"]),
            "unconfirmed_lists": list(row["unconfirmed_lists"]),
        }
    )


def _mailbox(email: str) -> str:
    if unsafe_text(email) or address_problem(email):
        raise not_found("subscriber")  # not an address: no subscriber can have it
    return email_key(email)


router = APIRouter(prefix="/subscribers", tags=["subscribers"])


@router.get("", operation_id="list_subscribers", summary="the account's subscribers, oldest first")
async def list_subscribers(
    conn: Conn,
    key: Key,
    status: Status | None = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    list_name: OnList = None,
) -> SubscriberPage:
    after = int(cursor) if cursor else 0
    rows = await conn.fetch(
        *db.sql(
            "subscribers_of_account",
            account_id=key.account_id,
            email_key=None,
            after_id=after,
            status=status,
            limit=limit + 1,
            list_name=list_name,
        ),
        timeout=DB_SECONDS,
    )
    page = [_subscriber(r) for r in rows[:limit]]
    return SubscriberPage(subscribers=page, next=str(page[-1].id) if len(rows) > limit else None)


@router.get(
    "/{email}",
    operation_id="get_subscriber",
    summary="one subscriber, by any spelling of its mailbox",
    responses=ERRORS,
)
async def get_subscriber(email: Email, conn: Conn, key: Key) -> Subscriber:
    rows = await conn.fetch(
        *db.sql(
            "subscribers_of_account",
            account_id=key.account_id,
            email_key=_mailbox(email),
            after_id=0,
            status=None,
            limit=1,
            list_name=None,
        ),
        timeout=DB_SECONDS,
    )
    if not rows:
        raise not_found("subscriber")
    return _subscriber(rows[0])


@router.put(
    "/{email}",
    operation_id="put_subscriber",
    summary="create the subscriber, or update its name and attributes",
    responses={201: {"model": Subscriber, "description": "created"}},
)
async def put_subscriber(
    email: Email,
    conn: Conn,
    key: Key,
    response: Response,
    fields: Annotated[
        SubscriberFields | None, Body(description="optional, as each of its fields: no body adds the address as it is")
    ] = None,
) -> Subscriber:
    fields = fields or SubscriberFields()
    problem = unsafe_text(email) or address_problem(email)
    if problem:
        raise HTTPException(422, f"not an email address: {problem}")
    if fields.name is not None and unsafe_text(fields.name):
        raise HTTPException(422, "name: control characters")
    attributes = json.dumps(fields.attributes, ensure_ascii=False) if fields.attributes is not None else None
    try:
        row = await conn.fetchrow(
            *db.sql(
                "subscriber_upsert",
                account_id=key.account_id,
                email=email,
                email_key=email_key(email),
                name=fields.name,
                attributes=attributes,
                lock_wait=f"{int(LOCK_SECONDS * 1000)}ms",
            ),
            timeout=DB_SECONDS,
        )
    except asyncpg.LockNotAvailableError:
        raise HTTPException(
            503, "an import into this account is running; try again shortly", headers={"Retry-After": "5"}
        ) from None
    response.status_code = 201 if row["created"] else 200
    [found] = await conn.fetch(
        *db.sql(
            "subscribers_of_account",
            account_id=key.account_id,
            email_key=email_key(email),
            after_id=row["id"] - 1,
            status=None,
            limit=1,
            list_name=None,
        ),
        timeout=DB_SECONDS,
    )
    return _subscriber(found)


@router.delete(
    "/{email}",
    operation_id="delete_subscriber",
    status_code=204,
    summary="erase the subscriber (GDPR art. 17); its mailbox stays suppressed",
    responses=CONFLICT,
)
async def delete_subscriber(email: Email, conn: Conn, key: Key) -> Response:
    account = await conn.fetchval(*db.sql("account_name", account_id=key.account_id), timeout=DB_SECONDS)
    try:
        async with conn.transaction():
            await erasure.erase(conn, account, key.account_id, email)
    except erasure.Unknown:
        raise not_found("subscriber") from None
    except erasure.Busy as exc:
        raise HTTPException(409, str(exc), headers={"Retry-After": "5"}) from None
    return Response(status_code=204)
