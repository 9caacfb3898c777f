"""A step's send window in each member's own time zone (zone 'local'): the sweep, a changed window and a rejoin
place each member's row at the window's hours in its `time_zone` attribute, else in the account's zone."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from actors.sequencer import sweep
from service.errors import Invalid
from service.sequences import steps
from tests.sequences.helpers import join, leave, make_sequence
from tests.sequences.test_edges import set_window

pytestmark = pytest.mark.anyio

# members and the zone their row must follow; the account's zone is Australia/Perth (UTC+8, no summer time)
MEMBERS = {
    "tokyo@example.com": ("Asia/Tokyo", "Asia/Tokyo"),
    "ny@example.com": ("America/New_York", "America/New_York"),
    "kolkata@example.com": ("Asia/Kolkata", "Asia/Kolkata"),
    "bad@example.com": ("Atlantis/Capital", "Australia/Perth"),
    "none@example.com": (None, "Australia/Perth"),
}


async def members(conn: asyncpg.Connection, account: int, list_id: int) -> dict[int, str]:
    """The members joined, each with its attribute; the zone each must follow, by subscriber id."""
    await conn.execute("UPDATE einmal.accounts SET time_zone = 'Australia/Perth' WHERE id = $1", account)
    ids = await join(conn, account, list_id, list(MEMBERS))
    for email, (given, _) in MEMBERS.items():
        if given is not None:
            await conn.execute(
                "UPDATE einmal.subscribers SET attributes = jsonb_build_object('time_zone', $2::text) WHERE email = $1",
                email,
                given,
            )
    return {i: zone for i, (_, zone) in zip(ids, MEMBERS.values(), strict=True)}


async def placed(conn: asyncpg.Connection, step: int, zones: dict[int, str], hour: int) -> None:
    """Each queued row of the step goes out in the hour `hour` of its member's zone, within a day."""
    rows = await conn.fetch(
        "SELECT subscriber_id, next_attempt_at, now() AS now FROM einmal.sends "
        "WHERE campaign_id = $1 AND status = 'queued'",
        step,
    )
    assert len(rows) == len(zones)
    for r in rows:
        local = r["next_attempt_at"].astimezone(ZoneInfo(zones[r["subscriber_id"]]))
        assert local.hour == hour, (zones[r["subscriber_id"]], local)
        assert r["now"] - timedelta(minutes=5) <= r["next_attempt_at"] <= r["now"] + timedelta(days=1)


async def test_a_local_window_places_each_members_row_in_its_own_zone(conn: asyncpg.Connection, dsn: str) -> None:
    window = steps.window(9, 10, steps.LOCAL)
    account, list_id, sequence, (first,) = await make_sequence(conn, dsn, [0], window=window)
    zones = await members(conn, account, list_id)
    assert (await sweep(conn, batch=10, wait_seconds=0)).queued == len(zones)
    await placed(conn, first, zones, 9)

    await set_window(conn, dsn, account, sequence, 1, steps.window(13, 14, steps.LOCAL))
    await placed(conn, first, zones, 13)

    # a member who leaves while its row waits, and joins again, is placed in the window as it now is, in its zone
    for member in zones:
        await leave(conn, list_id, member)
    await set_window(conn, dsn, account, sequence, 1, steps.window(20, 21, steps.LOCAL))
    await join(conn, account, list_id, list(MEMBERS))
    await placed(conn, first, zones, 20)


def test_a_window_takes_local_or_a_known_zone() -> None:
    assert steps.window(9, 17, "local").zone == "local"
    with pytest.raises(Invalid, match="no time zone named 'Local/Time'"):
        steps.window(9, 17, "Local/Time")
