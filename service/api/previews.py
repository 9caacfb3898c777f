"""GET /api/v1/campaigns/{id}/preview and POST /api/v1/campaigns/{id}/test: the message one subscriber
would get, as `einmal campaign preview` and `einmal campaign test` make it (service/campaigns/preview.py).

Compiling and rendering run in a worker thread, in the account's share of them (RENDERS a process,
RENDER_SHARE an account: service/api/deps.py), within the sandbox's budget; a preview over MAX_PREVIEW bytes
is refused. A test message goes to the address given through the configured relay, outside the campaign's
send rows, TESTS at a time per process; like the command's, it
carries a Message-ID of its own and an unsubscribe link that names nobody (render_test), so pressing it
cannot suppress the subscriber it was rendered for. It holds no database connection while it talks to the
relay (deps.KeyAlone): a relay that never answers keeps the pool's connections from no other request."""

import anyio
from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from service.accounts import replies
from service.addresses import address_problem
from service.api.campaigns import CampaignId, own
from service.api.deps import (
    CONFLICT,
    ERRORS,
    ConfigSections,
    Conn,
    IdempotencyKey,
    Key,
    KeyAlone,
    MailingConfig,
    checkout,
    not_found,
    renders,
)
from service.api.deps import limiter as _limiter
from service.campaigns import preview as previews
from service.mail.mailing import Mailing
from service.smtp.connection import Outcome, SmtpUnavailable
from service.text import MAX_EMAIL, MAX_NAME, shown

router = APIRouter(prefix="/campaigns", tags=["campaigns"])
TESTS = 4
Subscriber = Query(
    None,
    max_length=MAX_EMAIL,
    description="the subscriber's address, in any spelling; absent: the first member of the campaign's lists",
)


class Header(BaseModel):
    name: str
    value: str = Field(description="decoded (no encoded words), unfolded")


class Preview(BaseModel):
    subscriber: str = Field(description="the subscriber it was rendered for")
    headers: list[Header] = Field(description="in the order they go on the wire (the Date: now)")
    subject: str
    text: str = Field(description="the text body, decoded, its lines ending in \\n")
    html: str | None = Field(description="the HTML body, decoded; null when it has none")
    size: int = Field(description="the message's bytes on the wire")


class TestMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=MAX_EMAIL, description="where the test message goes")
    subscriber: str | None = Field(
        None,
        max_length=MAX_EMAIL,
        description=("whose message it is, in any spelling; absent: the first member of the campaign's lists"),
    )
    subject_prefix: str = Field("[TEST] ", max_length=100, description="put before its subject")
    name: str | None = Field(
        None,
        max_length=MAX_NAME,
        description="the recipient's name in its To, made as a campaign message's To is (\"\": none); absent: "
        "the name of the account's subscriber of `to`, else that of the subscriber whose message it is",
    )


class TestSent(BaseModel):
    to: str
    subscriber: str
    reply: str = Field(description="the relay's answer")


async def _render(
    request: Request,
    mailing: Mailing,
    conn,
    key,
    campaign_id: int,
    subscriber: str | None,
    test: previews.Test | None = None,
) -> previews.Rendered:
    """The message rendered off the event loop, in the account's share of the render threads."""
    await own(conn, key, campaign_id)
    if subscriber is not None and (problem := address_problem(subscriber)):
        raise HTTPException(422, f"subscriber: {shown(subscriber)} is not a valid address: {problem}")
    try:
        async with renders(request, key.account_id) as threads:
            return await previews.render(
                conn,
                mailing=mailing,
                campaign_id=campaign_id,
                subscriber=subscriber,
                test=test,
                limiter=threads,
            )
    except previews.NoSubscriber:
        raise not_found("subscriber") from None  # the API's word for what is not there


def _preview(message: bytes, subscriber: str) -> Preview:
    found = previews.readable(message)
    headers = [Header(name=k, value=v) for k, v in found.headers]
    return Preview(
        subscriber=subscriber, headers=headers, subject=found.subject, text=found.text, html=found.html, size=found.size
    )


@router.get(
    "/{campaign_id}/preview",
    operation_id="preview_campaign",
    responses=ERRORS,
    summary="the exact message one subscriber would get, decoded (its Date is now)",
)
async def preview(
    campaign_id: CampaignId,
    request: Request,
    conn: Conn,
    key: Key,
    mailing: MailingConfig,
    subscriber: str | None = Subscriber,
) -> Preview:
    made = await _render(request, mailing, conn, key, campaign_id, subscriber)
    message, email = made.message, made.subscriber
    if len(message) > previews.MAX_PREVIEW:
        raise HTTPException(
            422,
            f"the message is {len(message):,} bytes, more than a preview's {previews.MAX_PREVIEW:,}; "
            "`einmal campaign preview --out` writes it",
        )
    async with renders(request, key.account_id) as threads:
        return await anyio.to_thread.run_sync(_preview, message, email, limiter=threads)


@router.post(
    "/{campaign_id}/test",
    operation_id="send_test_message",
    responses=CONFLICT,
    summary="send one subscriber's message, marked as a test, to another address (outside the campaign)",
)
async def send_test(
    campaign_id: CampaignId,
    sent: TestMessage,
    request: Request,
    key: KeyAlone,
    sections: ConfigSections,
    idempotency_key: IdempotencyKey = None,
) -> TestSent:
    if problem := address_problem(sent.to):
        raise HTTPException(422, f"to: {shown(sent.to)} is not a valid address: {problem}")
    if not sent.subject_prefix.isprintable():
        raise HTTPException(422, "subject_prefix: printable characters only")
    if sent.name is not None and (problem := previews.name_problem(sent.name)):
        raise HTTPException(422, f"name: {problem}")
    async with checkout(request)() as conn:  # given back before the relay is asked
        made = await _render(
            request,
            sections.mailing,
            conn,
            key,
            campaign_id,
            sent.subscriber,
            test=previews.Test(sent.to, sent.subject_prefix, sent.name),
        )
        mine = await replies.own_relays(conn, account_id=key.account_id)  # what it is shown of the relay's words
    tests = _limiter(request, "tests", TESTS)
    try:
        tests.acquire_nowait()
    except anyio.WouldBlock:
        raise HTTPException(
            503, "too many test messages are going out; try again shortly", headers={"Retry-After": "5"}
        ) from None
    try:
        result = await previews.send_test(relaying=sections.relaying, made=made, to=sent.to)
    except SmtpUnavailable as exc:
        said = replies.shown(str(exc), own_relays=mine)
        raise HTTPException(503, f"test message not sent: {said}", headers={"Retry-After": "30"}) from None
    finally:
        tests.release()
    reply = replies.shown(result.reply, own_relays=mine) or ""
    if result.outcome is not Outcome.SENT:
        raise HTTPException(422, f"test message not accepted: {reply}")
    return TestSent(to=sent.to, subscriber=made.subscriber, reply=reply)
