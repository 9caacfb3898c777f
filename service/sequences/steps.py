"""A sequence's steps: add one, change one, delete one (docs/design.md#sequences, "The rules").

A step is a campaign of kind 'step' (sql/queries/sequence_step_create.sql). Its templates are checked as a
draft's are (service/campaigns/fields.py: compiled in the sandbox in a worker thread), its From by the account's
rule (service/mail/from_rule.py), and it is bulk mail: it needs a one-click unsubscribe. A step whose bodies show no
unsubscribe link (`{{ unsubscribe_url }}`) is added or changed all the same, with the warning a campaign gets
at create (service/campaigns/preview.py NO_LINK): the List-Unsubscribe header works, but people look for a
visible link. Each change runs under the sequence's row lock, so two changes of one sequence take turns:

- added: at the position given (else after the last, a deleted step's included; a position is never used twice),
  it goes to every member on the list who has not passed its position, once its delay after their previous step's
  send (the first step: their join) is reached;
- changed: the templates reach the rows claimed from then on (the nodes compile a step anew when its updated_at
  moves, actors/claimer.py), never a row already sent; a new delay applies to members not past the step; a new
  window places the step's rows still waiting for their first attempt;
- deleted: the step's campaign is cancelled (its queued rows fail with 'campaign cancelled', a claimed one is
  dropped at its start) and the members go on to the step after it.
"""

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import asyncpg

from service import db
from service.campaigns import fields, preview
from service.campaigns.transitions import transition
from service.errors import Conflict, Invalid, NotFound
from service.mail import clicks, from_rule, unsubscribe
from service.mail.mailing import Mailing
from service.text import shown

MAX_DELAY_SECONDS = 10 * 366 * 86400  # ten years
MAX_POSITION = 1_000_000


@dataclass(frozen=True)
class Window:
    """Send hours [start, end) in a time zone; end < start wraps past midnight."""

    start: int
    end: int
    zone: str


@dataclass(frozen=True)
class Step:
    sequence_id: int
    position: int
    campaign_id: int
    warnings: tuple[str, ...] = ()  # of an add or a change: what the step's messages lack (preview.NO_LINK)


def window(start: int, end: int, zone: str) -> Window:
    """A send window, checked; Invalid when it is none."""
    if not (0 <= start <= 23 and 0 <= end <= 23) or start == end:
        raise Invalid("window: two different hours from 0 to 23, e.g. 9-17 (17-9 wraps past midnight)")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"window: no time zone named {shown(zone)}, e.g. Europe/Berlin") from None
    return Window(start, end, zone)


def delay(seconds: int) -> int:
    if not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise Invalid(f"delay: 0 to {MAX_DELAY_SECONDS} seconds after the previous step (the first: the join)")
    return seconds


def position(value: int | None) -> int | None:
    if value is not None and not 1 <= value <= MAX_POSITION:
        raise Invalid(f"position: 1 to {MAX_POSITION}")
    return value


async def _checked(
    conn: asyncpg.Connection, *, mailing: Mailing, account_id: int, given: dict[str, Any], timeout: float | None
) -> dict[str, Any]:
    """The template fields given, checked as a draft's; the others as they are."""
    templates: dict[str, Any] = {k: given[k] for k in ("subject", "from_address", "text", "html") if k in given}
    checked = {**given, **await fields.checked(templates)}
    if checked.get("from_address"):
        await from_rule.check(
            conn,
            mailing=mailing,
            account_id=account_id,
            address=checked["from_address"],
            said="From",
            timeout=timeout,
        )
    if "delay_seconds" in checked:
        delay(checked["delay_seconds"])
    found = checked.get("window")
    if found is not None and not await conn.fetchval(*db.sql("sequence_zone_known", zone=found.zone), timeout=timeout):
        raise Invalid(f"window: the database knows no time zone named {shown(found.zone)}")
    return checked


async def _locked(conn: asyncpg.Connection, *, account_id: int, sequence_id: int) -> asyncpg.Record:
    found = await conn.fetchrow(*db.sql("sequence_lock", account_id=account_id, sequence_id=sequence_id))
    if found is None:
        raise NotFound("no such sequence")
    return found


async def _recheck(conn: asyncpg.Connection, *, sequence_id: int, at: int) -> None:
    """Members not past position `at` that are done or due later are looked at now: the sweep sets each to its
    time (a delay counts from the member's previous step's send) or queues the step."""
    await conn.execute(*db.sql("sequence_members_recheck", sequence_id=sequence_id, position=at))
    await conn.execute(*db.sql("sequence_notify", sequence_id=sequence_id))


async def add(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    sequence_id: int,
    subject: str,
    from_address: str,
    text: str,
    html: str | None = None,
    delay_seconds: int = 0,
    send_window: Window | None = None,
    at: int | None = None,
    track_clicks: bool = False,
    timeout: float | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> Step:
    """Step `at` (None: after the last) of the sequence, with its warnings (`limiter`: the render threads of a
    process that serves others). Invalid for a field that is not right, Conflict for a position taken, NotFound
    for a sequence not the account's."""
    if missing := unsubscribe.one_click_missing(mailing):
        raise Invalid(
            f"not added: a sequence's steps are bulk mail and need a one-click unsubscribe, which Gmail and Yahoo "
            f"require ({' and '.join(missing)} not set)"
        )
    if track_clicks and (lacking := clicks.missing(mailing)):
        raise Invalid(f"not added: click tracking needs {' and '.join(lacking)}, which this process has not")
    position(at)
    await _locked(conn, account_id=account_id, sequence_id=sequence_id)  # another account's sequence: 404 first
    given = {"subject": subject, "from_address": from_address, "text": text, "html": html, "window": send_window}
    checked = await _checked(conn, mailing=mailing, account_id=account_id, given=given, timeout=timeout)
    if not checked["text"].strip():
        raise Invalid("text: the text body must not be empty")
    delay(delay_seconds)
    async with conn.transaction():
        sequence = await _locked(conn, account_id=account_id, sequence_id=sequence_id)
        if at is None:
            at = await conn.fetchval(*db.sql("sequence_step_last", sequence_id=sequence_id)) + 1
        await conn.execute(*db.sql("campaign_partition_lock"))
        campaign_id = await conn.fetchval(
            *db.sql(
                "sequence_step_create",
                account_id=account_id,
                step_name=f"{sequence['name']} · step {at}"[: fields.MAX_CAMPAIGN_NAME],
                subject=checked["subject"],
                from_address=checked["from_address"],
                text=checked["text"],
                html=checked["html"],
                list_id=sequence["list_id"],
                paused=sequence["status"] == "paused",
                reply_to=None,
                language=None,
                sequence_id=sequence_id,
                position=at,
                delay_seconds=delay_seconds,
                window_from=send_window.start if send_window else None,
                window_to=send_window.end if send_window else None,
                window_zone=send_window.zone if send_window else None,
                track_clicks=track_clicks,
            ),
            timeout=timeout,
        )
        if campaign_id is None:
            raise Conflict(f"sequence {sequence_id} has had a step at position {at}: positions are never reused")
        await _recheck(conn, sequence_id=sequence_id, at=at)
    warnings = await preview.link_warnings(conn, mailing=mailing, campaign_id=campaign_id, limiter=limiter)
    return Step(sequence_id, at, campaign_id, warnings)


async def change(
    conn: asyncpg.Connection,
    *,
    mailing: Mailing,
    account_id: int,
    sequence_id: int,
    at: int,
    changes: dict[str, Any],
    timeout: float | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> Step:
    """Change step `at`'s fields in `changes` (subject, from_address, text, html, delay_seconds, window: a
    Window or None for none); the others stay. The step with the warnings of what it is now, as add's.
    NotFound for no such step."""
    await _locked(conn, account_id=account_id, sequence_id=sequence_id)  # another account's sequence: 404 first
    checked = await _checked(conn, mailing=mailing, account_id=account_id, given=changes, timeout=timeout)
    if "text" in checked and not (checked["text"] or "").strip():
        raise Invalid("text: the text body must not be empty")
    send_window = checked.get("window")
    async with conn.transaction():
        await _locked(conn, account_id=account_id, sequence_id=sequence_id)
        row = await conn.fetchrow(
            *db.sql(
                "sequence_step_update",
                sequence_id=sequence_id,
                position=at,
                given=list(checked),
                subject=checked.get("subject"),
                from_address=checked.get("from_address"),
                text=checked.get("text"),
                html=checked.get("html"),
                delay_seconds=checked.get("delay_seconds"),
                window_from=send_window.start if send_window else None,
                window_to=send_window.end if send_window else None,
                window_zone=send_window.zone if send_window else None,
            ),
            timeout=timeout,
        )
        if row is None:
            raise NotFound("no such step")
        if "delay_seconds" in checked:
            await _recheck(conn, sequence_id=sequence_id, at=at)
        if "window" in checked:  # the rows waiting for the old window's opening follow the new one
            await conn.execute(*db.sql("sequence_step_window_moved", campaign_id=row["id"]), timeout=timeout)
        await conn.execute(*db.sql("campaign_notify", campaign_id=row["id"]))  # the claimers list again
    warnings = await preview.link_warnings(conn, mailing=mailing, campaign_id=row["id"], limiter=limiter)
    return Step(sequence_id, at, row["id"], warnings)


async def delete(conn: asyncpg.Connection, *, account_id: int, sequence_id: int, at: int) -> Step:
    """Cancel step `at`: its rows not yet claimed fail ('campaign cancelled'); its members go on to the next."""
    async with conn.transaction():
        await _locked(conn, account_id=account_id, sequence_id=sequence_id)
        found = await conn.fetchrow(*db.sql("sequence_step_find", sequence_id=sequence_id, position=at))
        if found is None:
            raise NotFound("no such step")
        await transition(conn, verb="cancel", campaign_id=found["id"])
        following = await conn.fetchrow(*db.sql("sequence_step_next", sequence_id=sequence_id, position=at))
        if following is not None:
            await _recheck(conn, sequence_id=sequence_id, at=following["position"])
    return Step(sequence_id, at, found["id"])
