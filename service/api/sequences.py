"""/api/v1/sequences: the key's account's sequences (docs/design.md#sequences) — list, create on a list, status
(each step's send rows by state and the members waiting for it), pause, resume, and their steps: add, change,
delete. Steps are checked as drafts are (service/api/drafts.py): templates compiled in the sandbox in a worker
thread, the From by the account's rule; every statement takes the account from the key."""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from service.api.campaigns import MAX_BODY_TEXT, Engagement
from service.api.deps import CONFLICT, DB_SECONDS, ERRORS, RENDERS, Conn, IdempotencyKey, Key, MailingConfig, limiter
from service.campaigns.fields import MAX_FROM, MAX_SUBJECT
from service.engagement import counts
from service.errors import Invalid
from service.sequences import sequences, steps

router = APIRouter(prefix="/sequences", tags=["sequences"])
SequenceId = Annotated[int, Path(ge=1, le=2**63 - 1)]
Position = Annotated[int, Path(ge=1, le=steps.MAX_POSITION)]
State = Literal["running", "paused"]


class Sequence(BaseModel):
    id: int
    name: str
    list: str
    status: State
    created_at: datetime
    steps: int = Field(description="its steps, deleted ones not counted")
    members: int = Field(description="members on its list it follows")
    segment: str | None = Field(description="the segment that narrows it (its rule as it was when made); null: none")


class NewSequence(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=sequences.MAX_NAME)
    list: str = Field(min_length=1, max_length=200, description="the list whose members it follows")
    existing: bool = Field(
        False,
        description="true: the list's confirmed members now follow it too, as if they joined now; false: only "
        "those whose membership is confirmed from now on",
    )
    segment: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="one of the account's segments: each step goes to the members its rule takes when the step "
        "falls due (the rule as it is now); absent: every member",
    )


class Window(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: int = Field(ge=0, le=23, description="the hour it opens")
    end: int = Field(ge=0, le=23, description="the hour it closes; before start: it wraps past midnight")
    zone: str = Field(min_length=1, max_length=64, description="a time zone, e.g. Europe/Berlin")


class NewStep(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    subject: str = Field(min_length=1, max_length=MAX_SUBJECT, description="a template, like the bodies")
    from_address: str = Field(alias="from", min_length=1, max_length=MAX_FROM)
    text: str = Field(min_length=1, max_length=MAX_BODY_TEXT, description="the text body's template")
    html: str | None = Field(None, max_length=MAX_BODY_TEXT, description="the HTML body's template")
    delay_seconds: int = Field(
        0,
        ge=0,
        le=steps.MAX_DELAY_SECONDS,
        description="after the member's previous step was sent (the first step: after the confirmed join); 0: at once",
    )
    window: Window | None = Field(None, description="hours its messages may go out in; absent: any time")
    position: int | None = Field(
        None, ge=1, le=steps.MAX_POSITION, description="absent: after the last (positions are never reused)"
    )
    track_clicks: bool = Field(False, description="its links rewritten to tracked ones (docs: click tracking)")


class StepChanges(BaseModel):
    """The fields of a step to change; those left out stay as they are."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    subject: str | None = Field(None, min_length=1, max_length=MAX_SUBJECT, description="not null")
    from_address: str | None = Field(None, alias="from", min_length=1, max_length=MAX_FROM, description="not null")
    text: str | None = Field(None, min_length=1, max_length=MAX_BODY_TEXT, description="not null")
    html: str | None = Field(None, max_length=MAX_BODY_TEXT, description="null: none")
    delay_seconds: int | None = Field(None, ge=0, le=steps.MAX_DELAY_SECONDS, description="not null")
    window: Window | None = Field(None, description="null: any time")


class Step(BaseModel):
    sequence_id: int
    position: int
    campaign_id: int = Field(description="the step's campaign (kind 'step'): its send rows, its Message-IDs")


class CheckedStep(Step):
    warnings: list[str] = Field(
        description="what the step's messages lack, as a campaign's create says it: neither body showing "
        "{{ unsubscribe_url }}; empty when nothing"
    )


class StepProgress(BaseModel):
    position: int
    campaign_id: int
    status: Literal["sending", "paused", "cancelled"] = Field(description="cancelled: deleted")
    pause_reason: str | None
    subject: str
    from_address: str
    delay_seconds: int
    window: str | None = Field(description='"9-17 Europe/Berlin"; null: any time')
    counts: dict[str, int] = Field(description="send rows by state: queued, claimed, sending, sent, failed, …")
    waiting: int = Field(description="members on the list whose next step it is")


class SequenceProgress(BaseModel):
    sequence: Sequence
    steps: list[StepProgress]
    finished: int = Field(description="members on the list past its last step")
    left: int = Field(description="members who left the list (a rejoin continues where they stopped)")


class SequenceList(BaseModel):
    sequences: list[Sequence]


def _window(given: Window | None) -> steps.Window | None:
    return steps.window(given.start, given.end, given.zone) if given is not None else None


@router.get("", operation_id="list_sequences", summary="the account's sequences")
async def list_sequences(conn: Conn, key: Key) -> SequenceList:
    found = await sequences.listing(conn, account_id=key.account_id)
    return SequenceList(sequences=[Sequence(**asdict(s)) for s in found])


@router.post(
    "",
    operation_id="create_sequence",
    status_code=201,
    summary="a sequence on a list (409: the name is taken)",
    responses=CONFLICT,
)
async def create_sequence(given: NewSequence, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None) -> Sequence:
    made = await sequences.create(
        conn,
        account_id=key.account_id,
        name=given.name,
        list_name=given.list,
        existing=given.existing,
        segment=given.segment,
    )
    return Sequence(**asdict(made))


async def progress(conn, key, sequence_id: int) -> SequenceProgress:
    found = await sequences.status(conn, account_id=key.account_id, sequence_id=sequence_id)
    return SequenceProgress(
        sequence=Sequence(**asdict(found.sequence)),
        steps=[StepProgress(**asdict(s)) for s in found.steps],
        finished=found.finished,
        left=found.left,
    )


@router.get(
    "/{sequence_id}",
    operation_id="get_sequence",
    summary="each step's send rows by state and the members waiting for it",
    responses=ERRORS,
)
async def get_sequence(sequence_id: SequenceId, conn: Conn, key: Key) -> SequenceProgress:
    return await progress(conn, key, sequence_id)


class StepEngagement(Engagement):
    position: int
    campaign_id: int
    subject: str
    deleted: bool


class SequenceEngagement(BaseModel):
    sequence_id: int
    name: str
    steps: list[StepEngagement] = Field(description="each step's engagement, in order, deleted steps too")


@router.get(
    "/{sequence_id}/stats",
    operation_id="get_sequence_stats",
    summary="each step's engagement: delivered, bounced, complained, unsubscribed, clicked",
    responses=ERRORS,
)
async def sequence_stats(sequence_id: SequenceId, conn: Conn, key: Key) -> SequenceEngagement:
    found = await counts.of_sequence(conn, account_id=key.account_id, sequence_id=sequence_id)
    return SequenceEngagement(**asdict(found))


@router.post(
    "/{sequence_id}/pause",
    operation_id="pause_sequence",
    summary="hold every step (409 when paused)",
    responses=CONFLICT,
)
async def pause_sequence(
    sequence_id: SequenceId, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> SequenceProgress:
    await sequences.pause(conn, account_id=key.account_id, sequence_id=sequence_id)
    return await progress(conn, key, sequence_id)


@router.post(
    "/{sequence_id}/resume",
    operation_id="resume_sequence",
    summary="send every step again (409 when running)",
    responses=CONFLICT,
)
async def resume_sequence(
    sequence_id: SequenceId, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None
) -> SequenceProgress:
    await sequences.resume(conn, account_id=key.account_id, sequence_id=sequence_id)
    return await progress(conn, key, sequence_id)


@router.post(
    "/{sequence_id}/steps",
    operation_id="add_sequence_step",
    status_code=201,
    summary="add a step (409: its position was used)",
    responses=CONFLICT,
)
async def add_step(
    sequence_id: SequenceId,
    given: NewStep,
    request: Request,
    conn: Conn,
    key: Key,
    mailing: MailingConfig,
    idempotency_key: IdempotencyKey = None,
) -> CheckedStep:
    made = await steps.add(
        conn,
        mailing=mailing,
        account_id=key.account_id,
        sequence_id=sequence_id,
        subject=given.subject,
        from_address=given.from_address,
        text=given.text,
        html=given.html,
        delay_seconds=given.delay_seconds,
        send_window=_window(given.window),
        at=given.position,
        track_clicks=given.track_clicks,
        timeout=DB_SECONDS,
        limiter=limiter(request, "renders", RENDERS),
    )
    return CheckedStep(**asdict(made))


@router.patch(
    "/{sequence_id}/steps/{position}",
    operation_id="change_sequence_step",
    summary="change a step: its messages not yet sent take the change",
    responses=ERRORS,
)
async def change_step(
    sequence_id: SequenceId,
    position: Position,
    changes: StepChanges,
    request: Request,
    conn: Conn,
    key: Key,
    mailing: MailingConfig,
) -> CheckedStep:
    given = changes.model_dump(include=changes.model_fields_set)
    if nulls := [name for name in ("subject", "from_address", "text", "delay_seconds") if given.get(name, 0) is None]:
        raise Invalid(f"{nulls[0].replace('from_address', 'from')}: may not be null")
    if "window" in changes.model_fields_set:
        given["window"] = _window(changes.window)
    made = await steps.change(
        conn,
        mailing=mailing,
        account_id=key.account_id,
        sequence_id=sequence_id,
        at=position,
        changes=given,
        timeout=DB_SECONDS,
        limiter=limiter(request, "renders", RENDERS),
    )
    return CheckedStep(**asdict(made))


@router.delete(
    "/{sequence_id}/steps/{position}",
    operation_id="delete_sequence_step",
    summary="delete a step: its messages not yet sent are cancelled",
    responses=ERRORS,
)
async def delete_step(sequence_id: SequenceId, position: Position, conn: Conn, key: Key) -> Step:
    made = await steps.delete(conn, account_id=key.account_id, sequence_id=sequence_id, at=position)
    return Step(sequence_id=made.sequence_id, position=made.position, campaign_id=made.campaign_id)
