"""A sequence: make one on a list, list them, pause and resume one, say its status (docs/design.md#sequences).

Pausing a sequence is the campaign transition `pause` of each of its steps that is sending
(service/campaigns/transitions.py: a CAS and its NOTIFY each), under the sequence's row lock, in one transaction;
the sweep walks running sequences only, so nothing new is queued either. Resuming is `resume` of each paused step
(a step that paused itself, its template failing, too: the operator resumes the whole). What was queued meanwhile
is then claimed within the sending budget, as any campaign's rows.
"""

import json
from dataclasses import dataclass, replace
from datetime import datetime

import asyncpg

from service import db
from service.campaigns.transitions import transition
from service.errors import Conflict, Invalid, NotFound
from service.segments import segments
from service.text import one_line, shown

MAX_NAME = 200
STATES = ("queued", "claimed", "sending", "sent", "failed", "suppressed", "in_doubt")


@dataclass(frozen=True)
class Sequence:
    id: int
    name: str
    list: str
    status: str  # running | paused
    created_at: datetime
    steps: int = 0  # steps not deleted
    members: int = 0  # members on the list
    segment: str | None = None  # the segment that narrows it, by the rule it had when the sequence was made


@dataclass(frozen=True)
class StepStatus:
    position: int
    campaign_id: int
    status: str  # the step's campaign: sending, paused; cancelled once deleted
    pause_reason: str | None
    subject: str
    from_address: str
    delay_seconds: int
    window: str | None  # "9-17 Europe/Berlin"
    counts: dict[str, int]  # its send rows by state, every state named
    waiting: int  # members on the list whose next step it is


@dataclass(frozen=True)
class SequenceStatus:
    sequence: Sequence
    steps: list[StepStatus]
    finished: int  # members on the list past the last step
    left: int  # members who left the list (their progress kept: a rejoin continues)


def window_text(start: int | None, end: int | None, zone: str | None) -> str | None:
    return None if start is None else f"{start}-{end} {zone}"


async def create(
    conn: asyncpg.Connection,
    *,
    account_id: int,
    name: str,
    list_name: str,
    existing: bool = False,
    segment: str | None = None,
) -> Sequence:
    """A new running sequence on the account's list; with `existing`, the list's confirmed members now follow it
    from now on (else only those who join from now); with `segment`, each step goes to the members its rule (as it
    is now) takes when the step falls due. Invalid for a list or a segment the account does not have, Conflict for
    a name it has used."""
    name = one_line(name, "name", MAX_NAME)
    list_id = await conn.fetchval(*db.sql("optin_list_named", account_id=account_id, list_name=list_name))
    if list_id is None:
        raise Invalid(f"the account has no list named {shown(list_name)}")
    rule = None if segment is None else await segments.rule_for_campaign(conn, account_id=account_id, name=segment)
    row = await conn.fetchrow(
        *db.sql(
            "sequence_create",
            account_id=account_id,
            sequence_name=name,
            list_id=list_id,
            existing=existing,
            segment=segment,
            segment_rule=None if rule is None else json.dumps(rule),
        )
    )
    if row is None:
        raise Conflict(f"the account has a sequence named {shown(name)} already")
    if row["members"]:
        await conn.execute(*db.sql("sequence_notify", sequence_id=row["id"]))
    return replace(await get(conn, account_id=account_id, sequence_id=row["id"]), members=row["members"])


async def get(conn: asyncpg.Connection, *, account_id: int, sequence_id: int) -> Sequence:
    """The account's sequence; NotFound when it has none of that id (another account's included)."""
    row = await conn.fetchrow(*db.sql("sequence_get", account_id=account_id, sequence_id=sequence_id))
    if row is None:
        raise NotFound("no such sequence")
    return Sequence(row["id"], row["name"], row["list"], row["status"], row["created_at"], segment=row["segment"])


async def listing(conn: asyncpg.Connection, *, account_id: int) -> list[Sequence]:
    rows = await conn.fetch(*db.sql("sequence_list", account_id=account_id))
    return [
        Sequence(r["id"], r["name"], r["list"], r["status"], r["created_at"], r["steps"], r["members"], r["segment"])
        for r in rows
    ]


async def _steps_to(conn: asyncpg.Connection, *, sequence_id: int, verb: str, reason: str) -> None:
    """Each step in the state `verb` moves from, moved by the campaign transition; one that moved meanwhile (a
    step pausing itself) is left as it is."""
    before = "sending" if verb == "pause" else "paused"
    for step in await conn.fetch(*db.sql("sequence_steps_in", sequence_id=sequence_id, status=before)):
        try:
            await transition(conn, verb=verb, campaign_id=step["id"], reason=reason)
        except Conflict:
            continue


async def pause(conn: asyncpg.Connection, *, account_id: int, sequence_id: int) -> Sequence:
    """Hold every step: no row of it is claimed and no new one queued until `resume`. Conflict when paused."""
    return await _move(conn, account_id=account_id, sequence_id=sequence_id, verb="pause")


async def resume(conn: asyncpg.Connection, *, account_id: int, sequence_id: int) -> Sequence:
    """Every step sends again, the sweep queues again. Conflict when running."""
    return await _move(conn, account_id=account_id, sequence_id=sequence_id, verb="resume")


async def _move(conn: asyncpg.Connection, *, account_id: int, sequence_id: int, verb: str) -> Sequence:
    before, after = ("running", "paused") if verb == "pause" else ("paused", "running")
    async with conn.transaction():
        found = await conn.fetchrow(*db.sql("sequence_lock", account_id=account_id, sequence_id=sequence_id))
        if found is None:
            raise NotFound("no such sequence")
        moved = await conn.fetchval(
            *db.sql("sequence_status_set", sequence_id=sequence_id, from_status=before, to_status=after)
        )
        if moved is None:
            raise Conflict(f"cannot {verb} sequence {sequence_id}: it is {found['status']}")
        await _steps_to(conn, sequence_id=sequence_id, verb=verb, reason="sequence paused")
        if verb == "resume":
            await conn.execute(*db.sql("sequence_notify", sequence_id=sequence_id))
    return await get(conn, account_id=account_id, sequence_id=sequence_id)


async def status(conn: asyncpg.Connection, *, account_id: int, sequence_id: int) -> SequenceStatus:
    """Each step's send rows by state and the members waiting for it; members past the last step, and left."""
    sequence = await get(conn, account_id=account_id, sequence_id=sequence_id)
    rows = await conn.fetch(*db.sql("sequence_steps", sequence_id=sequence_id))
    live = [r["position"] for r in rows if r["status"] != "cancelled"]
    waiting: dict[int, int] = {}
    finished = left = members = 0
    for group in await conn.fetch(*db.sql("sequence_members_count", sequence_id=sequence_id)):
        left += group["gone"]
        members += group["active"]
        following = [p for p in live if p > group["last_position"]]
        if following:
            waiting[following[0]] = waiting.get(following[0], 0) + group["active"]
        else:
            finished += group["active"]
    steps = [
        StepStatus(
            r["position"],
            r["id"],
            r["status"],
            r["pause_reason"],
            r["subject"],
            r["from_address"],
            r["delay_seconds"],
            window_text(r["window_from"], r["window_to"], r["window_zone"]),
            {state: int(json.loads(r["counts"]).get(state, 0)) for state in STATES},
            waiting.get(r["position"], 0),
        )
        for r in rows
    ]
    shown_sequence = Sequence(
        sequence.id,
        sequence.name,
        sequence.list,
        sequence.status,
        sequence.created_at,
        len(live),
        members,
        sequence.segment,
    )
    return SequenceStatus(shown_sequence, steps, finished, left)
