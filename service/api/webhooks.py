"""/api/v1/webhooks: the key's account's outbound webhook endpoints (docs/design.md#webhooks) — list,
create (the signing secret shown once, in the answer), remove, rotate the secret (shown once), the
deliveries of one (by state), replay its parked deliveries.

A read key may list; only a write key changes anything (deps.key refuses a read key on anything but GET).
Another account's endpoints are neither listed nor changed (404). The URL policy (service/webhooks/policy.py)
refuses a URL that is not https or whose host resolves to a non-public address (422); the create route holds
no connection while it asks DNS (deps.KeyAlone)."""

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Literal

import asyncpg
from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.api.deps import (
    ERRORS,
    ConfigSections,
    Conn,
    IdempotencyKey,
    Key,
    KeyAlone,
    ReachConfig,
    connected,
    problem,
)
from service.webhooks import endpoints

router = APIRouter(prefix="/webhooks", tags=["webhooks"])
EndpointId = Annotated[int, Path(ge=1, le=2**63 - 1)]
EventType = Literal[
    "message.sent",
    "message.failed",
    "message.bounced",
    "message.complained",
    "subscriber.unsubscribed",
    "subscriber.confirmed",
    "sequence.step_sent",
    "message.clicked",
    "message.opened",
]
State = Literal["pending", "delivered", "parked"]


class WebhookEndpoint(BaseModel):
    id: int
    url: str
    events: list[str]
    created_at: datetime
    disabled_at: datetime | None = Field(
        description="when a 410 Gone answer disabled it; a replay enables it. No event is kept for it while it is "
        "disabled: those events are not delivered after the replay"
    )
    disabled_reason: str | None
    rotating_until: datetime | None = Field(description="the previous secret signs too until then")
    pending: int = Field(description="deliveries waiting for their next attempt")
    parked: int = Field(description="deliveries that gave up: replay them with POST /webhooks/{id}/replay")


class NewWebhookEndpoint(BaseModel):
    id: int
    url: str
    events: list[str]
    created_at: datetime
    secret: str = Field(description="the signing secret (whsec_…): shown in this answer only")


class RotatedSecret(BaseModel):
    id: int
    secret: str = Field(description="the new signing secret: shown in this answer only")
    previous_until: datetime = Field(description="the previous secret signs too until then")


class WebhookDelivery(BaseModel):
    event_id: str
    type: str
    sequence: int = Field(description="the event's number among its address's events, in commit order")
    state: State
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime


class Replayed(BaseModel):
    id: int
    replayed: int = Field(description="parked deliveries made pending again, due now")
    not_kept_since: datetime | None = Field(
        description="the endpoint was disabled (a 410) from then until this replay enabled it: no event of that "
        "time was kept for it, so none of them is delivered; null: it was not disabled"
    )


class WebhookFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(
        max_length=2000, description="the endpoint: https only; the URL policy refuses a host with a non-public address"
    )
    events: list[EventType] | None = Field(None, max_length=6, description="the event types; none: every type")


@router.get("", operation_id="list_webhooks", summary="the account's webhook endpoints (never their secrets)")
async def list_webhooks(conn: Conn, key: Key) -> list[WebhookEndpoint]:
    return [WebhookEndpoint(**asdict(e)) for e in await endpoints.listing(conn, account_id=key.account_id)]


@router.post(
    "",
    operation_id="create_webhook",
    status_code=201,
    responses={422: problem("the URL is refused by the URL policy, or a field is not right")},
    summary="a new webhook endpoint; its signing secret is in this answer only (a write key may do this)",
)
async def create_webhook(
    fields: WebhookFields,
    request: Request,
    key: KeyAlone,
    reach: ReachConfig,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> NewWebhookEndpoint:
    async with AsyncExitStack() as held:  # add's connection and transaction, kept open for the line of the log
        taken: list[asyncpg.Connection] = []

        @asynccontextmanager
        async def kept() -> AsyncIterator[asyncpg.Connection]:
            taken.append(await held.enter_async_context(connected(request)))
            await held.enter_async_context(taken[0].transaction())
            yield taken[0]

        made = await endpoints.add(
            kept,
            reach,
            account_id=key.account_id,
            url=fields.url,
            events=list(fields.events) if fields.events else None,
        )
        await audit.by_key(taken[0], key, "webhook.create", f"webhook {made.id}")
    response.headers["Cache-Control"] = "no-store"
    return NewWebhookEndpoint(**asdict(made))


@router.delete(
    "/{endpoint_id}",
    operation_id="delete_webhook",
    status_code=204,
    responses=ERRORS,
    summary="remove the endpoint, with its deliveries",
)
async def delete_webhook(endpoint_id: EndpointId, conn: Conn, key: Key) -> Response:
    async with conn.transaction():
        await endpoints.remove(conn, account_id=key.account_id, id=endpoint_id)
        await audit.by_key(conn, key, "webhook.remove", f"webhook {endpoint_id}")
    return Response(status_code=204)


@router.post(
    "/{endpoint_id}/rotate",
    operation_id="rotate_webhook_secret",
    responses=ERRORS,
    summary="a new signing secret, in this answer only; the previous one signs too for a while",
)
async def rotate_webhook_secret(
    endpoint_id: EndpointId,
    conn: Conn,
    key: Key,
    sections: ConfigSections,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> RotatedSecret:
    async with conn.transaction():
        rotated = await endpoints.rotate(
            conn, sections.webhook_rotation_hours, account_id=key.account_id, id=endpoint_id
        )
        await audit.by_key(conn, key, "webhook.rotate", f"webhook {endpoint_id}")
    response.headers["Cache-Control"] = "no-store"
    return RotatedSecret(**asdict(rotated))


@router.get(
    "/{endpoint_id}/deliveries",
    operation_id="list_webhook_deliveries",
    responses=ERRORS,
    summary="the endpoint's deliveries, newest first, in one state or any",
)
async def list_webhook_deliveries(
    endpoint_id: EndpointId,
    conn: Conn,
    key: Key,
    state: State | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[WebhookDelivery]:
    found = await endpoints.deliveries(conn, account_id=key.account_id, id=endpoint_id, state=state, limit=limit)
    return [WebhookDelivery(**asdict(d)) for d in found]


@router.post(
    "/{endpoint_id}/replay",
    operation_id="replay_webhook",
    responses=ERRORS,
    summary="the endpoint's parked deliveries pending again, due now (and the endpoint enabled again)",
)
async def replay_webhook(
    endpoint_id: EndpointId, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> Replayed:
    async with conn.transaction():
        replayed = await endpoints.replay(conn, account_id=key.account_id, id=endpoint_id)
        await audit.by_key(conn, key, "webhook.replay", f"webhook {endpoint_id}")
    return Replayed(**asdict(replayed))
