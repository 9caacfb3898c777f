"""A segment: make one, list them, show, change, delete one; count and sample the mailboxes it takes
(docs/guide/segments.md). Every function takes the account; another account's segment is not found."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from service import db
from service.errors import Conflict, Invalid, NotFound
from service.segments import rules
from service.segments.compiled import bound
from service.text import one_line, shown

MAX_NAME = 200
MAX_SAMPLE = 100


@dataclass(frozen=True)
class Segment:
    id: int
    name: str
    rule: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Count:
    subscribers: int  # mailboxes a campaign to the segment would take, suppressed ones included
    suppressed: int  # of them, suppressed: their rows would be 'suppressed', nothing sent


@dataclass(frozen=True)
class Sampled:
    email: str
    name: str
    attributes: dict[str, Any]
    subscribed_at: datetime
    suppressed: bool


def _segment(row: asyncpg.Record) -> Segment:
    return Segment(row["id"], row["name"], json.loads(row["rule"]), row["created_at"], row["updated_at"])


def name_of(value: str) -> str:
    return one_line(value, "name", MAX_NAME)


async def checked(conn: asyncpg.Connection, *, account_id: int, rule: Any) -> rules.Node:
    """The rule's tree; Invalid when it is not right or names a list or a campaign the account does not have."""
    tree = rules.parse(rule)
    members, received = rules.references(tree)
    if members or received:
        missing = await conn.fetchrow(
            *db.sql(
                "segment_references",
                account_id=account_id,
                lists=[m.list for m in members],
                campaigns=[r.campaign for r in received],
            )
        )
        assert missing is not None  # the query returns one row
        for m in members:
            if m.list in missing["lists"]:
                raise Invalid(f"rule {m.path}: the account has no list named {shown(m.list)}")
        for r in received:
            if r.campaign in missing["campaigns"]:
                raise Invalid(f"rule {r.path}.campaign: the account has no campaign {r.campaign}")
    return tree


async def create(conn: asyncpg.Connection, *, account_id: int, name: str, rule: Any) -> Segment:
    """A new segment; Invalid for a rule that is not right, Conflict for a name the account has used."""
    name = name_of(name)
    await checked(conn, account_id=account_id, rule=rule)
    row = await conn.fetchrow(
        *db.sql("segment_insert", account_id=account_id, segment_name=name, rule=json.dumps(rule))
    )
    if row is None:
        raise Conflict(f"the account has a segment named {shown(name)} already")
    return _segment(row)


async def listing(conn: asyncpg.Connection, *, account_id: int) -> list[Segment]:
    return [_segment(r) for r in await conn.fetch(*db.sql("segments_of_account", account_id=account_id))]


async def get(conn: asyncpg.Connection, *, account_id: int, name: str) -> Segment:
    """The account's segment; NotFound when it has none of that name."""
    row = await conn.fetchrow(*db.sql("segment_get", account_id=account_id, segment_name=name))
    if row is None:
        raise NotFound("no such segment")
    return _segment(row)


async def update(conn: asyncpg.Connection, *, account_id: int, name: str, rule: Any) -> Segment:
    """The segment with its new rule; campaigns made from it keep theirs. NotFound before a rule is looked at."""
    await get(conn, account_id=account_id, name=name)
    await checked(conn, account_id=account_id, rule=rule)
    row = await conn.fetchrow(
        *db.sql("segment_update", account_id=account_id, segment_name=name, rule=json.dumps(rule))
    )
    if row is None:
        raise NotFound("no such segment")
    return _segment(row)


async def delete(conn: asyncpg.Connection, *, account_id: int, name: str) -> None:
    if await conn.fetchval(*db.sql("segment_delete", account_id=account_id, segment_name=name)) is None:
        raise NotFound("no such segment")


async def count(conn: asyncpg.Connection, *, account_id: int, name: str, timeout: float | None = None) -> Count:
    """How many mailboxes a campaign to the segment alone would take now, and how many of them are suppressed."""
    found = await get(conn, account_id=account_id, name=name)
    now = await conn.fetchval("SELECT now()")
    row = await conn.fetchrow(
        *bound("segment_count", found.rule, owner=account_id, now=now, account_id=account_id), timeout=timeout
    )
    assert row is not None  # the query returns one row
    return Count(row["subscribers"], row["suppressed"])


async def sample(
    conn: asyncpg.Connection, *, account_id: int, name: str, limit: int = 10, timeout: float | None = None
) -> list[Sampled]:
    """The first `limit` (1 to MAX_SAMPLE) of those `count` counts, by address."""
    if not 1 <= limit <= MAX_SAMPLE:
        raise Invalid(f"limit: 1 to {MAX_SAMPLE}")
    found = await get(conn, account_id=account_id, name=name)
    now = await conn.fetchval("SELECT now()")
    rows = await conn.fetch(
        *bound("segment_sample", found.rule, owner=account_id, now=now, account_id=account_id, size=limit),
        timeout=timeout,
    )
    return [Sampled(r["email"], r["name"], json.loads(r["attributes"]), r["created_at"], r["suppressed"]) for r in rows]


async def rule_for_campaign(conn: asyncpg.Connection, *, account_id: int, name: str) -> dict[str, Any]:
    """The rule a new campaign to segment `name` keeps; Invalid when the account has no such segment."""
    row = await conn.fetchrow(*db.sql("segment_get", account_id=account_id, segment_name=name))
    if row is None:
        raise Invalid(f"the account has no segment named {shown(name)}")
    rule: dict[str, Any] = json.loads(row["rule"])
    return rule
