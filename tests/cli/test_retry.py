"""`einmal campaign retry ID --failed [--reason R | --reply PATTERN]` against a real PostgreSQL."""

import anyio
import asyncpg
import pytest

from tests.cli.test_campaign_commands import one_line_error, seed_campaign
from tests.conftest import einmal

pytestmark = pytest.mark.anyio

REPLIES = (
    "550 5.7.26 Unauthenticated email is not accepted due to domain's DMARC policy",
    "554 5.7.1 Service unavailable; client host blocked using Spamhaus",
    "550 5.1.1 <r2@example.org>: Recipient address rejected: User unknown",
    "451 4.3.0 Temporary lookup failure (gave up after 5 attempts)",
)


async def failed_campaign(conn: asyncpg.Connection, status: str = "sent") -> int:
    """A campaign in `status` with one sent row (r0) and four failed ones (r1..r4), their replies REPLIES."""
    campaign = await seed_campaign(conn, status, sends=("sent", "failed", "failed", "failed", "failed"))
    for i, reply in enumerate(REPLIES, start=1):
        await conn.execute(
            "UPDATE einmal.sends SET last_reply = $2, attempts = 5 WHERE email = $1", f"r{i}@example.org", reply
        )
    await conn.execute("UPDATE einmal.campaigns SET sent_at = now() WHERE id = $1", campaign)
    return campaign


async def queued(conn: asyncpg.Connection, campaign: int) -> list[str]:
    return [
        r["email"]
        for r in await conn.fetch(
            "SELECT email FROM einmal.sends WHERE campaign_id = $1 AND status = 'queued' ORDER BY email", campaign
        )
    ]


async def test_retry_by_reason_queues_those_rows_again_and_reopens_a_sent_campaign(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await failed_campaign(conn)
    heard = anyio.Event()
    await conn.add_listener("einmal_campaign", lambda *a: heard.set() if a[3] == str(campaign) else None)
    before = {r["email"]: r["id"] for r in await conn.fetch("SELECT email, id FROM einmal.sends")}
    result = einmal("campaign", "retry", str(campaign), "--failed", "--reason", "authentication", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"1 failed row of campaign {campaign} queued again\ncampaign {campaign} is sending again\n"
    )
    row = await conn.fetchrow(
        "SELECT id, status, attempts, claimed_by, next_attempt_at = '-infinity' AS due, "
        "last_reply FROM einmal.sends WHERE email = 'r1@example.org'"
    )
    assert tuple(row) == (before["r1@example.org"], "queued", 0, None, True, REPLIES[0]), "the same row"
    assert await queued(conn, campaign) == ["r1@example.org"]
    campaign_row = await conn.fetchrow("SELECT status, sent_at FROM einmal.campaigns WHERE id = $1", campaign)
    assert tuple(campaign_row) == ("sending", None)
    with anyio.fail_after(30):
        await heard.wait()


async def test_retry_by_reply_pattern_and_then_every_failed_row(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await failed_campaign(conn, "sending")
    result = einmal("campaign", "retry", str(campaign), "--failed", "--reply", "spamhaus|5\\.7\\.26", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"2 failed rows of campaign {campaign} queued again\n", "a sending campaign stays so"
    assert await queued(conn, campaign) == ["r1@example.org", "r2@example.org"]
    result = einmal("campaign", "retry", str(campaign), "--failed", "--reply", "no such reply", dsn=dsn)
    assert result.stdout == f"0 failed rows of campaign {campaign} queued again\n"
    result = einmal("campaign", "retry", str(campaign), "--failed", dsn=dsn)
    assert result.stdout == f"2 failed rows of campaign {campaign} queued again\n"
    assert len(await queued(conn, campaign)) == 4
    assert await conn.fetchval("SELECT status FROM einmal.sends WHERE email = 'r0@example.org'") == "sent"


async def test_retry_of_a_paused_campaign_queues_the_rows_and_leaves_it_paused(
    conn: asyncpg.Connection, dsn: str
) -> None:
    campaign = await failed_campaign(conn, "paused")
    result = einmal("campaign", "retry", str(campaign), "--failed", "--reason", "no_mailbox", dsn=dsn)
    assert result.stdout == f"1 failed row of campaign {campaign} queued again\n"
    assert await conn.fetchval("SELECT status FROM einmal.campaigns WHERE id = $1", campaign) == "paused"


async def test_retry_refuses_a_cancelled_campaign_in_one_line(conn: asyncpg.Connection, dsn: str) -> None:
    campaign = await failed_campaign(conn, "cancelled")
    line = one_line_error(einmal("campaign", "retry", str(campaign), "--failed", dsn=dsn))
    assert line == f"einmal: cannot retry failed rows of campaign {campaign}: it is cancelled"
    assert await queued(conn, campaign) == []
    line = one_line_error(einmal("campaign", "retry", "999999", "--failed", dsn=dsn))
    assert line == "einmal: no campaign with id 999999"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "the following arguments are required: --failed"),
        (("--failed", "--reason", "spam"), "argument --reason: invalid choice: 'spam'"),
        (("--failed", "--reply", "("), "argument --reply: '(' is not a regular expression"),
        (("--failed", "--reply", " "), "argument --reply: must not be empty"),
        (("--failed", "--reason", "policy", "--reply", "x"), "argument --reply: not allowed with argument --reason"),
    ],
)
def test_bad_retry_arguments_are_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    result = einmal("campaign", "retry", "1", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and says in result.stderr, result.stderr
