"""`einmal reconcile ID [--resend | --mark-sent]` against a real PostgreSQL."""

import anyio
import asyncpg
import pytest

from tests.cli.test_campaign_commands import one_line_error, seed_campaign
from tests.conftest import cells, einmal

pytestmark = pytest.mark.anyio


async def statuses(conn: asyncpg.Connection, campaign: int) -> dict[str, str]:
    return dict(await conn.fetch("SELECT email, status FROM einmal.sends WHERE campaign_id = $1", campaign))


async def test_reconcile_lists_only_the_in_doubt_rows_then_a_count(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "in_doubt", "failed", "in_doubt"))
    # as the scheduler leaves a row whose node died on the wire: the node's token kept, attempts not counted
    await conn.execute(
        "UPDATE einmal.sends SET claimed_by = 'node-b', attempts = 0, last_reply = 'node node-b died "
        "during the SMTP transaction' WHERE campaign_id = $1 AND email = 'r3@example.org'",
        campaign,
    )
    rows = {r["email"]: r for r in await conn.fetch("SELECT * FROM einmal.sends WHERE campaign_id = $1", campaign)}
    result = einmal("reconcile", str(campaign), dsn=dsn)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert cells(lines[0]) == ["id", "email", "node", "in doubt since", "last reply"]
    assert [cells(line) for line in lines[1:3]] == [
        [str(rows[email]["id"]), email, node, rows[email]["updated_at"].isoformat(timespec="seconds"), reply]
        for email, node, reply in (
            ("r1@example.org", "node-a", "connection lost after DATA"),
            ("r3@example.org", "node-b", "node node-b died during the SMTP transaction"),
        )
    ]
    assert "attempts" not in result.stdout
    assert lines[3] == (
        f"2 in-doubt rows in campaign {campaign}; decide with --resend or --mark-sent (all, or "
        "some with --id and --address)"
    )
    assert await statuses(conn, campaign) == {
        "r0@example.org": "sent",
        "r1@example.org": "in_doubt",
        "r2@example.org": "failed",
        "r3@example.org": "in_doubt",
    }


async def test_some_rows_are_decided_by_id_or_address_and_the_others_stay_in_doubt(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("in_doubt",) * 4)
    ids = {
        r["email"]: r["id"]
        for r in await conn.fetch("SELECT email, id FROM einmal.sends WHERE campaign_id = $1", campaign)
    }
    sent = einmal(
        "reconcile",
        str(campaign),
        "--mark-sent",
        "--id",
        str(ids["r0@example.org"]),
        "--address",
        "R2@Example.org",
        dsn=dsn,
    )
    assert sent.stdout == f"2 in-doubt rows of campaign {campaign} marked sent\n", sent.stderr
    resent = einmal("reconcile", str(campaign), "--resend", "--address", "r1@example.org", dsn=dsn)
    assert resent.stdout == f"1 in-doubt row of campaign {campaign} queued again\n", resent.stderr
    assert await statuses(conn, campaign) == {
        "r0@example.org": "sent",
        "r1@example.org": "queued",
        "r2@example.org": "sent",
        "r3@example.org": "in_doubt",
    }
    # a row that is not in doubt (any more) is refused, and nothing of the command is done
    refused = einmal(
        "reconcile",
        str(campaign),
        "--mark-sent",
        "--address",
        "r3@example.org",
        "--id",
        str(ids["r0@example.org"]),
        dsn=dsn,
    )
    assert one_line_error(refused) == (
        f"einmal: campaign {campaign} has no in-doubt row with id {ids['r0@example.org']}; nothing decided"
    )
    unknown = einmal("reconcile", str(campaign), "--resend", "--address", "nobody@example.org", dsn=dsn)
    assert one_line_error(unknown) == (
        f"einmal: campaign {campaign} has no in-doubt row for 'nobody@example.org'; nothing decided"
    )
    assert (await statuses(conn, campaign))["r3@example.org"] == "in_doubt"
    listed = einmal("reconcile", str(campaign), "--address", "r3@example.org", dsn=dsn).stdout.splitlines()
    assert cells(listed[1])[:2] == [str(ids["r3@example.org"]), "r3@example.org"] and len(listed) == 3


async def test_reconcile_of_a_campaign_without_doubt_says_zero(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent",))
    result = einmal("reconcile", str(campaign), dsn=dsn)
    assert (result.returncode, result.stdout) == (0, f"0 in-doubt rows in campaign {campaign}\n")


async def test_resend_queues_the_rows_again_and_reopens_a_sent_campaign(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("sent", "in_doubt", "in_doubt"))
    await conn.execute("UPDATE einmal.campaigns SET sent_at = now() WHERE id = $1", campaign)
    heard = anyio.Event()
    await conn.add_listener("einmal_campaign", lambda *a: heard.set() if a[3] == str(campaign) else None)
    result = einmal("reconcile", str(campaign), "--resend", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"2 in-doubt rows of campaign {campaign} queued again\ncampaign {campaign} is sending again\n"
    )
    rows = await conn.fetch(
        "SELECT status, claimed_by, next_attempt_at = '-infinity' AS due "
        "FROM einmal.sends WHERE campaign_id = $1 AND email <> 'r0@example.org'",
        campaign,
    )
    assert [tuple(r) for r in rows] == [("queued", None, True)] * 2
    assert (await statuses(conn, campaign))["r0@example.org"] == "sent"
    row = await conn.fetchrow("SELECT status, sent_at FROM einmal.campaigns WHERE id = $1", campaign)
    assert tuple(row) == ("sending", None)
    with anyio.fail_after(30):
        await heard.wait()


async def test_resend_leaves_a_sending_or_paused_campaign_in_its_state(conn: asyncpg.Connection, dsn: str) -> None:
    for state in ("sending", "paused"):
        campaign = await seed_campaign(conn, state, sends=("in_doubt",))
        result = einmal("reconcile", str(campaign), "--resend", dsn=dsn)
        assert result.stdout == f"1 in-doubt row of campaign {campaign} queued again\n", result.stderr
        assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == state


async def test_resend_refuses_a_cancelled_campaign_and_moves_nothing(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "cancelled", sends=("in_doubt",))
    result = einmal("reconcile", str(campaign), "--resend", dsn=dsn)
    assert one_line_error(result) == (f"einmal: cannot resend in-doubt rows of campaign {campaign}: it is cancelled")
    assert await statuses(conn, campaign) == {"r0@example.org": "in_doubt"}


async def test_mark_sent_records_the_rows_as_sent_now(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await seed_campaign(conn, "sent", sends=("in_doubt", "failed", "in_doubt"))
    result = einmal("reconcile", str(campaign), "--mark-sent", dsn=dsn)
    assert (result.returncode, result.stdout) == (0, f"2 in-doubt rows of campaign {campaign} marked sent\n")
    rows = await conn.fetch(
        "SELECT email, status, sent_at IS NOT NULL AS stamped FROM einmal.sends WHERE campaign_id = $1 ORDER BY email",
        campaign,
    )
    assert [tuple(r) for r in rows] == [
        ("r0@example.org", "sent", True),
        ("r1@example.org", "failed", False),
        ("r2@example.org", "sent", True),
    ]
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "sent"


@pytest.mark.parametrize("decision", ["--resend", "--mark-sent"])
async def test_a_decision_moves_only_in_doubt_rows_so_a_second_run_moves_none(
    conn: asyncpg.Connection, dsn: str, decision: str
) -> None:
    campaign = await seed_campaign(conn, "sending", sends=("in_doubt", "sending", "queued", "claimed"))
    first = einmal("reconcile", str(campaign), decision, dsn=dsn)
    second = einmal("reconcile", str(campaign), decision, dsn=dsn)
    assert first.stdout.startswith(f"1 in-doubt row of campaign {campaign} "), first.stderr
    assert second.stdout.startswith(f"0 in-doubt rows of campaign {campaign} "), second.stderr
    after = await statuses(conn, campaign)
    assert [after[f"r{i}@example.org"] for i in (1, 2, 3)] == ["sending", "queued", "claimed"]
