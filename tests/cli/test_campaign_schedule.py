"""When a campaign starts, as `campaign approve`, `status` (table, --json, --follow) and `list` show it, and
the rows a cancel settled, counted as cancelled rather than failed."""

import io
import json
import re
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from service import db
from service.cli import campaign_status
from tests.cli.test_campaign_commands import seed_account, seed_campaign
from tests.conftest import cells, einmal

pytestmark = pytest.mark.anyio

IN_80_MIN = re.compile(r"scheduled for (\S+) \(in 1 h 20 min\)")


async def scheduled_campaign(dsn: str, conn: asyncpg.Connection) -> tuple[int, datetime]:
    """A draft created with --at 80 minutes and a few seconds from now."""
    await seed_account(conn)
    at = (datetime.now(UTC) + timedelta(minutes=80, seconds=20)).replace(microsecond=0)
    result = einmal(
        "campaign",
        "create",
        "--account",
        "acme",
        "--name",
        "later",
        "--subject",
        "Hi",
        "--from",
        "news@example.org",
        "--text",
        "Hello",
        "--at",
        at.isoformat(),
        dsn=dsn,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout), at


async def test_approve_status_and_json_say_when_a_scheduled_campaign_starts(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, at = await scheduled_campaign(dsn, conn)
    approved = einmal("campaign", "approve", str(campaign), dsn=dsn)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith(f"campaign {campaign} approved; scheduled for ")
    assert IN_80_MIN.search(approved.stdout)[1] == at.isoformat()
    lines = einmal("campaign", "status", str(campaign), dsn=dsn).stdout.splitlines()
    assert lines[0] == f"campaign {campaign} 'later': approved"
    assert IN_80_MIN.fullmatch(lines[1].strip())[1] == at.isoformat()
    snapshot = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert datetime.fromisoformat(snapshot["scheduled_for"]) == at and snapshot["started_at"] is None


async def test_follow_before_the_start_says_when_it_starts_not_done_0_of_0(conn: asyncpg.Connection, dsn: str) -> None:
    campaign, at = await scheduled_campaign(dsn, conn)
    assert einmal("campaign", "approve", str(campaign), dsn=dsn).returncode == 0
    out = io.StringIO()

    async def cancel_meanwhile(seconds: float) -> None:  # the operator gives up: the follow ends
        await conn.execute("UPDATE einmal.campaigns SET status = 'cancelled' WHERE id = $1", campaign)

    await campaign_status.follow(conn, campaign, out, tty=False, interval=0, sleep=cancel_meanwhile)
    first = out.getvalue().splitlines()[0]
    assert "done 0/0" not in first and "ETA" not in first
    assert first.endswith(f"approved: scheduled for {at.isoformat()} (in 1 h 20 min)")


async def test_list_has_a_header_and_shows_the_start_only_of_a_started_campaign(
    conn: asyncpg.Connection, dsn: str
) -> None:
    draft = await seed_campaign(conn, "draft")
    later, at = await scheduled_campaign(dsn, conn)
    started = await seed_campaign(conn, "approved")
    assert (await conn.fetchrow(*db.sql("campaign_start", campaign_id=started)))["id"] == started
    started_at = await conn.fetchval("SELECT started_at FROM einmal.campaigns WHERE id = $1", started)
    listing = einmal("campaign", "list", dsn=dsn)
    assert listing.returncode == 0, listing.stderr
    header, *rows = [cells(line) for line in listing.stdout.splitlines()]
    assert header == ["id", "account", "name", "status", "started", "recipients"]
    assert rows == [
        [str(started), "acme", "spring", "sending", started_at.isoformat(timespec="seconds"), "0"],
        [str(later), "acme", "later", f"draft (scheduled for {at.isoformat()})", "-", "0"],
        [str(draft), "acme", "spring", "draft", "-", "0"],
    ]


async def test_rows_a_cancel_settled_are_counted_as_cancelled_not_failed(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("queued", "queued", "queued", "sent", "failed"))
    await conn.execute(
        "UPDATE einmal.sends SET last_reply = '550 5.1.1 no such user' WHERE campaign_id = $1 AND status = 'failed'",
        campaign,
    )
    assert einmal("campaign", "cancel", str(campaign), dsn=dsn).returncode == 0
    snapshot = json.loads(einmal("campaign", "status", str(campaign), "--json", dsn=dsn).stdout)
    assert (snapshot["counts"]["cancelled"], snapshot["counts"]["failed"], snapshot["counts"]["sent"]) == (3, 1, 1)
    assert snapshot["failures"] == [{"reply": "550 5.1.1 no such user", "count": 1}]
    table = einmal("campaign", "status", str(campaign), dsn=dsn).stdout.splitlines()
    assert ["cancelled", "3"] in [line.split() for line in table]
    assert ["failed", "1"] in [line.split() for line in table]
    # the stored status words stay those of the contract: the rows are failed, with the reply that says why
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'failed' "
            "AND last_reply = 'campaign cancelled'",
            campaign,
        )
        == 3
    )
