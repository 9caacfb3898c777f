"""/api/v1/subscribers: list with a cursor, get by any spelling of the mailbox, create or update (PUT),
erase (DELETE, the erasure of `einmal subscribers delete`); and many created or updated in one call
(POST /subscribers/batch, service/subscribers/batch.py), each row with its outcome."""

import json
from collections import Counter
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

import anyio.to_thread
from fastapi import APIRouter, Body, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from service import audit
from service.api.deps import CONFLICT, ERRORS, Conn, Cursor, Key, KeyAlone, body_as, connected, not_found, read_itself
from service.engagement import activity
from service.subscribers import batch, erasure, subscriber
from service.text import MAX_ATTRIBUTE, MAX_EMAIL, MAX_NAME

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


class Activity(BaseModel):
    """When each thing last happened to the subscriber; null: never (or not since its erasure)."""

    delivered: datetime | None = Field(description="its last message answered 250")
    clicked: datetime | None = Field(description="its last click tagged a person's")
    clicked_any: datetime | None = Field(description="its last click, a machine's too")
    bounced: datetime | None = Field(description="its last hard bounce")
    complained: datetime | None
    unsubscribed: datetime | None = Field(description="its last one-click unsubscribe")
    last: str | None = Field(description="which of them is the latest (a machine's click aside); null: none")


class SubscriberShown(Subscriber):
    activity: Activity


class SubscriberPage(BaseModel):
    subscribers: list[Subscriber]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class SubscriberFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=MAX_NAME, description="unchanged when absent")
    attributes: dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=MAX_ATTRIBUTE)]] | None = (
        Field(None, max_length=200, description="merged into the stored ones: a key given replaces its value")
    )


# a row is a TypedDict, not a model: a thousand rows are checked in a third of the time, with the same errors
@with_config(ConfigDict(extra="forbid"))
class BatchRow(TypedDict):
    """One row of a batch. Its values are checked row by row (an invalid row is reported, the others written):
    the bounds here are only what no row could be."""

    email: Annotated[str, Field(max_length=1000, description="the address, in any spelling of its mailbox")]
    name: NotRequired[Annotated[str | None, Field(max_length=10_000, description="unchanged when absent")]]
    attributes: NotRequired[
        Annotated[
            dict[str, Any] | None,
            Field(
                description="merged into the stored ones: a key given replaces its value. Values are text: a row "
                'with another JSON value (`{"age": 42}`) is invalid, the others are written'
            ),
        ]
    ]
    lists: NotRequired[
        Annotated[
            list[str],
            Field(
                max_length=100,
                json_schema_extra={"default": []},
                description=f"the account's lists to put it on (at most {batch.MAX_ROW_LISTS}), as confirmed "
                "members; a sign-up awaiting confirmation stays one. A list the account does not have makes the "
                "row invalid",
            ),
        ]
    ]


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subscribers: list[BatchRow] = Field(
        min_length=1, max_length=batch.MAX_ROWS, description=f"1 to {batch.MAX_ROWS} rows, written in this order"
    )


class BatchOutcome(BaseModel):
    email: str = Field(description="as the row gave it")
    outcome: Literal["created", "updated", "invalid"] = Field(
        description="invalid: nothing of the row was written (see `reason`)"
    )
    id: int | None = Field(description="the subscriber; null for an invalid row")
    status: Status | None = Field(description="what is true of the subscriber now; null for an invalid row")
    unconfirmed_lists: list[str] = Field(
        description="the lists the row named on which the subscriber still awaits its own confirmation"
    )
    reason: str | None = Field(description="why the row is invalid, in one line; null otherwise")


class BatchAnswer(BaseModel):
    created: int
    updated: int
    invalid: int
    subscribers: list[BatchOutcome] = Field(description="one per row, in the rows' order")


def _subscriber(found: subscriber.Subscriber) -> Subscriber:
    return Subscriber(**vars(found))


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
    rows = await subscriber.page(
        conn, account_id=key.account_id, after_id=after, limit=limit + 1, status=status, list_name=list_name
    )
    page = [_subscriber(r) for r in rows[:limit]]
    return SubscriberPage(subscribers=page, next=str(page[-1].id) if len(rows) > limit else None)


@router.post(
    "/batch",
    operation_id="batch_subscribers",
    summary=f"create or update up to {batch.MAX_ROWS} subscribers, with lists and attributes: each row's outcome",
    response_model=BatchAnswer,
    openapi_extra=read_itself(Batch),
)
async def batch_subscribers(request: Request, key: KeyAlone) -> Response:
    # the body, up to a MiB, is read and checked in a worker thread, and the answer made there: milliseconds
    # a thousand rows that the event loop does not wait for; a connection is taken for the writes alone
    body = await request.body()
    rows = await anyio.to_thread.run_sync(_rows, body, request.headers.get("content-type"))
    async with connected(request) as conn, conn.transaction():
        outcomes = await batch.upsert(conn, account_id=key.account_id, rows=rows)
        n = Counter(o.outcome for o in outcomes)
        told = f"subscribers: {n['created']} created, {n['updated']} updated, {n['invalid']} invalid"
        await audit.by_key(conn, key, "subscriber.batch", told)
    return Response(await anyio.to_thread.run_sync(_answer, outcomes), media_type="application/json")


# the models of the bodies the routes here read themselves: service/api/app.py puts them in the document
READ_ITSELF = (Batch,)


def _rows(body: bytes, content_type: str | None) -> list[batch.Row]:
    given = body_as(body, content_type, Batch)
    return [
        batch.Row(r["email"], r.get("name"), r.get("attributes"), tuple(dict.fromkeys(r.get("lists", ()))))
        for r in given.subscribers
    ]


def _answer(outcomes: list[batch.Outcome]) -> bytes:
    """The BatchAnswer of `outcomes`, as JSON: what FastAPI makes of the model, made without a model a row."""
    counted = {"created": 0, "updated": 0, "invalid": 0}
    for o in outcomes:
        counted[o.outcome] += 1
    told = [
        {
            "email": o.email,
            "outcome": o.outcome,
            "id": o.id,
            "status": o.status,
            "unconfirmed_lists": list(o.unconfirmed_lists),
            "reason": o.reason,
        }
        for o in outcomes
    ]
    return json.dumps({**counted, "subscribers": told}, ensure_ascii=False, separators=(",", ":")).encode()


@router.get(
    "/{email}",
    operation_id="get_subscriber",
    summary="one subscriber, by any spelling of its mailbox",
    responses=ERRORS,
)
async def get_subscriber(email: Email, conn: Conn, key: Key) -> SubscriberShown:
    found = await subscriber.find(conn, account_id=key.account_id, email=email)
    last = await activity.of_subscriber(conn, subscriber_id=found.id)
    return SubscriberShown(**vars(found), activity=Activity(**asdict(last), last=last.last))


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
    async with conn.transaction():
        found, created = await subscriber.upsert(
            conn, account_id=key.account_id, email=email, name=fields.name, attributes=fields.attributes
        )
        await audit.by_key(conn, key, "subscriber.put", f"subscriber {found.email}")
    response.status_code = 201 if created else 200
    return _subscriber(found)


@router.delete(
    "/{email}",
    operation_id="delete_subscriber",
    status_code=204,
    summary="erase the subscriber (GDPR art. 17); its mailbox stays suppressed",
    responses=CONFLICT,
)
async def delete_subscriber(email: Email, conn: Conn, key: Key) -> Response:
    try:
        await subscriber.erase(conn, account_id=key.account_id, email=email, actor=f"api:key {key.id}")
    except erasure.Unknown:
        raise not_found("subscriber") from None
    except erasure.Busy as exc:
        raise HTTPException(409, str(exc), headers={"Retry-After": "5"}) from None
    return Response(status_code=204)
