"""/api/v1/messages and /api/v1/message-templates: transactional messages (service/messages/messages.py,
docs/design.md#messages).

`POST /messages` answers 202 with the message's id at once; the message goes out ahead of bulk mail. The route
itself is idempotent by its Idempotency-Key (kept EINMAL_MESSAGE_KEY_HOURS, the middleware's window too):
whatever died between a claim and its answer, a retry finds the same message. `GET /messages/{id}` tells its
state from its send row; another account's is 404; `GET /messages` lists them, newest first (as the console).
`POST /messages/batch` queues up to batch.MAX_MESSAGES at once, each item's outcome back
(service/messages/batch.py): under the request's Idempotency-Key `k` item `i` is made under `k:i`, so that a
retry of the route itself makes only what is missing."""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from service.accounts import replies
from service.api.campaigns import Engagement
from service.api.deps import (
    ERRORS,
    Conn,
    IdempotencyKey,
    Key,
    KeyAlone,
    MailingConfig,
    QueueingConfig,
    body_as,
    connected,
    read_itself,
    render_slots,
)
from service.engagement import counts
from service.messages import batch, messages
from service.text import MAX_EMAIL

router = APIRouter(tags=["messages"])
MAX_SOURCE = 1_000_000  # characters of a subject or body
MessageId = Annotated[int, Path(ge=messages.MESSAGE_IDS_FROM, le=2**63 - 1, description="the id POST answered")]
TemplateName = Annotated[str, Path(min_length=1, max_length=messages.MAX_TEMPLATE_NAME)]


class MessageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=MAX_EMAIL, description="the recipient's address")
    template: str | None = Field(
        None, min_length=1, max_length=messages.MAX_TEMPLATE_NAME, description="one of the account's templates"
    )
    subject: str | None = Field(None, max_length=MAX_SOURCE, description="without a template: the subject")
    text: str | None = Field(None, max_length=MAX_SOURCE, description="without a template: the text body")
    html: str | None = Field(None, max_length=MAX_SOURCE, description="without a template: an HTML body")
    from_: str | None = Field(
        None, alias="from", max_length=MAX_EMAIL + 200, description="the From (else the template's), of its domains"
    )
    data: dict[str, Any] = Field(
        default_factory=dict, description="merged over the subscriber's attributes: `{{ attributes.order }}`"
    )
    honour_unsubscribe: bool = Field(
        False, description="true: an address unsubscribed from the account's lists gets no message either"
    )


class MessageBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[MessageRequest] = Field(
        min_length=1,
        max_length=batch.MAX_MESSAGES,
        description=f"1 to {batch.MAX_MESSAGES} messages, each what POST /messages takes; made in this order",
    )


class BatchItem(BaseModel):
    outcome: Literal["queued", "invalid"] = Field(description="invalid: no message was made (see `reason`)")
    id: int | None = Field(description="the message; null for an invalid item")
    created: bool = Field(description="false: made before, under the item's key `<Idempotency-Key>:<index>`")
    reason: str | None = Field(description="why the item is invalid, in one line")


class BatchQueued(BaseModel):
    queued: int
    invalid: int
    messages: list[BatchItem] = Field(description="one per item, in the items' order")


class Queued(BaseModel):
    id: int
    status: Literal["queued"]
    created: bool = Field(description="false: the message its Idempotency-Key made before")


class MessageState(BaseModel):
    id: int
    state: str = Field(description="queued, sending, sent, failed, suppressed or in_doubt")
    email: str
    subject: str
    from_address: str
    template: str | None
    data: dict[str, Any]
    honour_unsubscribe: bool
    attempts: int
    last_reply: str | None
    sent_at: datetime | None
    created_at: datetime
    bounces: list[str] = Field(description="its bounces and complaints: `hard: no_mailbox`, `complaint`, …")


class TemplateFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subject: str = Field(min_length=1, max_length=MAX_SOURCE)
    text: str = Field(min_length=1, max_length=MAX_SOURCE)
    html: str | None = Field(None, max_length=MAX_SOURCE)
    from_: str | None = Field(None, alias="from", max_length=MAX_EMAIL + 200)


class MessageTemplate(BaseModel):
    name: str
    subject: str
    text: str
    html: str | None
    from_: str | None = Field(serialization_alias="from")
    created_at: datetime
    updated_at: datetime


def _template(t: messages.Template) -> MessageTemplate:
    return MessageTemplate(
        name=t.name,
        subject=t.subject,
        text=t.body_text,
        html=t.body_html,
        from_=t.from_address,
        created_at=t.created_at,
        updated_at=t.updated_at,
    )


@router.post(
    "/messages",
    operation_id="send_message",
    status_code=202,
    responses=ERRORS,
    summary="queue one transactional message; it goes out once, ahead of bulk mail (a write key may do this)",
)
async def send_message(
    body: MessageRequest,
    request: Request,
    key: KeyAlone,
    queueing: QueueingConfig,
    idempotency_key: IdempotencyKey = None,
) -> Queued:
    messages.recipient(body.to)  # what `send` refuses first, refused before any render
    messages.payload_of(body.data)
    subject, text, html, from_ = body.subject, body.text, body.html, body.from_
    if body.template is not None and subject is None and text is None and html is None:
        async with connected(request) as conn:
            source = await messages.template(conn, account_id=key.account_id, name=body.template)
        subject, text, html, from_ = source.subject, source.body_text, source.body_html, from_ or source.from_address
    elif body.template is not None:
        subject = None  # a template and sources both: `send` refuses it
    if subject is not None and text is not None and from_:
        # the trial render, no connection held; `send` then finds these sources tried (unless a PUT changed them)
        await messages.check_sources(
            queueing.mailing,
            subject=subject,
            body_text=text,
            body_html=html,
            from_address=from_,
            account_id=key.account_id,
            slots=render_slots(request),
        )
    async with connected(request) as conn:
        made = await messages.send(
            conn,
            queueing=queueing,
            account_id=key.account_id,
            to=body.to,
            template_name=body.template,
            subject=body.subject,
            body_text=body.text,
            body_html=body.html,
            from_address=body.from_,
            data=body.data,
            honour_unsubscribe=body.honour_unsubscribe,
            idempotency_key=idempotency_key,
        )
    return Queued(id=made.id, status="queued", created=made.created)


# the models of the bodies the routes here read themselves: service/api/app.py puts them in the document
READ_ITSELF = (MessageBatch,)


@router.post(
    "/messages/batch",
    operation_id="send_message_batch",
    status_code=202,
    responses=ERRORS,
    summary=f"queue up to {batch.MAX_MESSAGES} transactional messages: each item's id, or why it is invalid",
    openapi_extra=read_itself(MessageBatch),
)
async def send_message_batch(
    request: Request, key: KeyAlone, queueing: QueueingConfig, idempotency_key: IdempotencyKey = None
) -> BatchQueued:
    # the body, up to EINMAL's MAX_BODY, is read and checked in a worker thread: a thousand items the event loop
    # does not wait for; a connection is taken once it is read
    body = await request.body()
    items = await anyio.to_thread.run_sync(_items, body, request.headers.get("content-type"))
    async with connected(request) as conn:
        outcomes = await batch.send(
            conn,
            queueing=queueing,
            account_id=key.account_id,
            items=items,
            idempotency_key=idempotency_key,
        )
    return BatchQueued(
        queued=sum(o.outcome == "queued" for o in outcomes),
        invalid=sum(o.outcome == "invalid" for o in outcomes),
        messages=[BatchItem(outcome=o.outcome, id=o.id, created=o.created, reason=o.reason) for o in outcomes],
    )


def _items(body: bytes, content_type: str | None) -> list[batch.Item]:
    return [
        batch.Item(
            to=m.to,
            template_name=m.template,
            subject=m.subject,
            body_text=m.text,
            body_html=m.html,
            from_address=m.from_,
            data=m.data,
            honour_unsubscribe=m.honour_unsubscribe,
        )
        for m in body_as(body, content_type, MessageBatch).messages
    ]


class ListedMessage(BaseModel):
    id: int
    state: str = Field(description="queued, sending, sent, failed, suppressed or in_doubt")
    email: str
    subject: str
    template: str | None
    sent_at: datetime | None
    created_at: datetime


@router.get("/messages", operation_id="list_messages", summary="the account's messages, newest first")
async def list_messages(
    conn: Conn,
    key: Key,
    before: Annotated[int, Query(ge=1, le=2**63 - 1, description="the ids below this one (the next page)")] = 2**63 - 1,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[ListedMessage]:
    found = await messages.listing(conn, account_id=key.account_id, before=before, limit=limit)
    return [ListedMessage(**asdict(m)) for m in found]


@router.get("/messages/{message_id:int}", operation_id="get_message", responses=ERRORS, summary="a message's state")
async def get_message(message_id: MessageId, conn: Conn, key: Key) -> MessageState:
    found = asdict(await messages.show(conn, account_id=key.account_id, message_id=message_id))
    own = await replies.own_relays(conn, account_id=key.account_id)
    return MessageState(**{**found, "last_reply": replies.shown(found["last_reply"], own_relays=own)})


@router.get("/message-templates", operation_id="list_message_templates", summary="the account's message templates")
async def list_message_templates(conn: Conn, key: Key) -> list[MessageTemplate]:
    return [_template(t) for t in await messages.templates(conn, account_id=key.account_id)]


@router.get("/message-templates/{name}", operation_id="get_message_template", responses=ERRORS, summary="one template")
async def get_message_template(name: TemplateName, conn: Conn, key: Key) -> MessageTemplate:
    return _template(await messages.template(conn, account_id=key.account_id, name=name))


class TemplateEngagement(Engagement):
    template: str = Field(description="its name; the messages made from it while it had that name are counted")


@router.get(
    "/message-templates/{name}/stats",
    operation_id="get_message_template_stats",
    responses=ERRORS,
    summary="the engagement of the messages made from it: delivered, bounced, complained, unsubscribed",
)
async def message_template_stats(name: TemplateName, conn: Conn, key: Key) -> TemplateEngagement:
    return TemplateEngagement(**asdict(await counts.of_template(conn, account_id=key.account_id, name=name)))


@router.put(
    "/message-templates/{name}",
    operation_id="put_message_template",
    responses={**ERRORS, 201: {"model": MessageTemplate, "description": "made now"}},
    summary="make (201) or replace (200) a template; messages already queued keep what they were made with",
)
async def put_message_template(
    name: TemplateName,
    fields: TemplateFields,
    request: Request,
    response: Response,
    key: KeyAlone,
    mailing: MailingConfig,
) -> MessageTemplate:
    messages.checked_name(name)
    await messages.check_sources(  # the trial render, no connection held (put_template finds them tried)
        mailing,
        subject=fields.subject,
        body_text=fields.text,
        body_html=fields.html or None,
        from_address=fields.from_ or messages.TEMPLATE_FROM,
        account_id=key.account_id,
        slots=render_slots(request),
    )
    async with connected(request) as conn:
        made, created = await messages.put_template(
            conn,
            mailing=mailing,
            account_id=key.account_id,
            name=name,
            subject=fields.subject,
            body_text=fields.text,
            body_html=fields.html or None,
            from_address=fields.from_ or None,
        )
    response.status_code = 201 if created else 200
    return _template(made)


@router.delete("/message-templates/{name}", operation_id="delete_message_template", status_code=204, responses=ERRORS)
async def delete_message_template(name: TemplateName, conn: Conn, key: Key) -> Response:
    await messages.remove_template(conn, account_id=key.account_id, name=name)
    return Response(status_code=204)
