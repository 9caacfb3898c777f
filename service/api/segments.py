"""/api/v1/segments: the key's account's segments (docs/guide/segments.md) — make one, list, show, change its
rule, delete; count and sample the mailboxes a campaign to it would take. A rule is typed JSON, checked and
compiled by service/segments/rules.py; what is wrong in it is a 422 naming its JSON path. Every statement takes
the account from the key: another account's segment is 404."""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from service import audit
from service.api.deps import CONFLICT, DB_SECONDS, ERRORS, Conn, IdempotencyKey, Key
from service.segments import segments

router = APIRouter(prefix="/segments", tags=["segments"])
SegmentName = Annotated[str, Path(min_length=1, max_length=segments.MAX_NAME, description="the segment's name")]
RULE = (
    'a rule of the segment language, e.g. {"all": [{"attribute": "plan", "op": "eq", "value": "pro"}, '
    '{"not": {"member": "churned"}}, {"subscribed": {"after": "2026-01-01"}}]} (docs/guide/segments.md)'
)


class Segment(BaseModel):
    id: int
    name: str
    rule: dict[str, Any] = Field(description=RULE)
    created_at: datetime
    updated_at: datetime


class NewSegment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=segments.MAX_NAME)
    rule: dict[str, Any] = Field(description=RULE)


class RuleChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: dict[str, Any] = Field(description=RULE)


class SegmentList(BaseModel):
    segments: list[Segment]


class SegmentCount(BaseModel):
    name: str
    subscribers: int = Field(
        description="mailboxes a campaign to the segment alone would take now: confirmed subscribers who match, "
        "through a confirmed membership of one of the account's lists, each mailbox once; suppressed ones included"
    )
    suppressed: int = Field(description="of them, suppressed: a campaign would send them nothing")


class Sampled(BaseModel):
    email: str
    name: str
    attributes: dict[str, Any]
    subscribed_at: datetime
    suppressed: bool


class SegmentSample(BaseModel):
    name: str
    subscribers: list[Sampled] = Field(description="the first of those the count counts, by address")


@router.get("", operation_id="list_segments", summary="the account's segments, by name")
async def list_segments(conn: Conn, key: Key) -> SegmentList:
    found = await segments.listing(conn, account_id=key.account_id)
    return SegmentList(segments=[Segment(**asdict(s)) for s in found])


@router.post(
    "",
    operation_id="create_segment",
    status_code=201,
    summary="a segment (422: its rule is not right; 409: the name is taken)",
    responses=CONFLICT,
)
async def create_segment(given: NewSegment, conn: Conn, key: Key, idempotency_key: IdempotencyKey = None) -> Segment:
    async with conn.transaction():
        made = await segments.create(conn, account_id=key.account_id, name=given.name, rule=given.rule)
        await audit.by_key(conn, key, "segment.create", f"segment {made.name}")
    return Segment(**asdict(made))


@router.get("/{name}", operation_id="get_segment", summary="the segment and its rule", responses=ERRORS)
async def get_segment(name: SegmentName, conn: Conn, key: Key) -> Segment:
    return Segment(**asdict(await segments.get(conn, account_id=key.account_id, name=name)))


@router.put(
    "/{name}",
    operation_id="change_segment",
    summary="give the segment a new rule; campaigns made from it keep theirs",
    responses=ERRORS,
)
async def change_segment(name: SegmentName, given: RuleChange, conn: Conn, key: Key) -> Segment:
    async with conn.transaction():
        changed = await segments.update(conn, account_id=key.account_id, name=name, rule=given.rule)
        await audit.by_key(conn, key, "segment.change", f"segment {name}")
    return Segment(**asdict(changed))


@router.delete(
    "/{name}",
    operation_id="delete_segment",
    status_code=204,
    summary="delete the segment; campaigns made from it keep its rule",
    responses=ERRORS,
)
async def delete_segment(name: SegmentName, conn: Conn, key: Key) -> Response:
    async with conn.transaction():
        await segments.delete(conn, account_id=key.account_id, name=name)
        await audit.by_key(conn, key, "segment.delete", f"segment {name}")
    return Response(status_code=204)


@router.get(
    "/{name}/count",
    operation_id="count_segment",
    summary="how many mailboxes a campaign to the segment would take now",
    responses=ERRORS,
)
async def count_segment(name: SegmentName, conn: Conn, key: Key) -> SegmentCount:
    found = await segments.count(conn, account_id=key.account_id, name=name, timeout=DB_SECONDS)
    return SegmentCount(name=name, **asdict(found))


@router.get(
    "/{name}/sample",
    operation_id="sample_segment",
    summary="the first mailboxes a campaign to the segment would take, by address",
    responses=ERRORS,
)
async def sample_segment(
    name: SegmentName,
    conn: Conn,
    key: Key,
    limit: Annotated[int, Query(ge=1, le=segments.MAX_SAMPLE)] = 10,
) -> SegmentSample:
    found = await segments.sample(conn, account_id=key.account_id, name=name, limit=limit, timeout=DB_SECONDS)
    return SegmentSample(name=name, subscribers=[Sampled(**asdict(s)) for s in found])
