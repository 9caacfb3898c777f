"""Each account's own budget, kept in the claim beside the installation's (einmal.send_claim,
docs/design.md#sending-budget): an account whose quota is spent claims nothing while another still sends; its
own setting (`einmal accounts set`) comes before the installation's default (EINMAL_ACCOUNT_*), `default` gives
it back; its rate holds across several claimers at once."""

import asyncpg
import pytest

from service import db
from service.settings import Settings
from tests.conftest import einmal
from tests.sending.test_budget import sending_campaign, worst_window
from tests.support.claims import claim_args

pytestmark = pytest.mark.anyio


async def two_campaigns(conn: asyncpg.Connection, recipients: int) -> tuple[int, int]:
    """Account 'a' and account 'b' (the seed's 'acme', renamed), each with a sending campaign."""
    a = await sending_campaign(conn, recipients)
    await conn.execute("UPDATE einmal.accounts SET name = 'a' WHERE name = 'acme'")
    b = await sending_campaign(conn, recipients)
    await conn.execute("UPDATE einmal.accounts SET name = 'b' WHERE name = 'acme'")
    return a, b


async def claim(
    conn: asyncpg.Connection, campaign: int, settings: Settings, token: str = "node", reach: float = 0.0
) -> int:
    """Rows of `campaign` claimed by one claim of 50 under `settings`' budget."""
    return len(await slots(conn, campaign, settings, token, reach))


async def slots(
    conn: asyncpg.Connection, campaign: int, settings: Settings, token: str = "node", reach: float = 0.0
) -> list[float]:
    """The send slots (epoch seconds; 0: none) of the rows of `campaign` one claim of 50 took."""
    rows = await conn.fetch(
        *db.sql(
            "send_claim_batch",
            **claim_args(
                campaign,
                token,
                batch_size=50,
                rate=settings.rate_limit,
                account_rate=settings.account_rate_limit,
                account_quota_hour=settings.account_quota_hour,
                account_quota_day=settings.account_quota_day,
                reach=reach,
            ),
        )
    )
    return [r["slot_at"].timestamp() if r["slot_at"] else 0.0 for r in rows if r["status"] == "claimed"]


async def test_an_account_with_its_quota_spent_claims_nothing_and_another_sends(
    conn: asyncpg.Connection, dsn: str
) -> None:
    a, b = await two_campaigns(conn, 200)
    settings = Settings(database_url=dsn, account_quota_hour=100)  # every account's, unless its own
    result = einmal("accounts", "set", "a", "--quota-hour", "70", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert "quota-hour 70" in result.stdout and "rate default" in result.stdout, result.stdout
    taken = [await claim(conn, a, settings) for _ in range(3)]
    assert taken == [50, 20, 0], "a's own quota of 70 holds"
    assert await claim(conn, b, settings) == 50, "b is not charged for a's rows"
    assert await claim(conn, b, settings) == 50
    assert await claim(conn, b, settings) == 0, "b's quota is the default, 100"
    # given back to the default (100): a has 30 more; its quota of none (0) is no quota
    assert einmal("accounts", "set", "a", "--quota-hour", "default", dsn=dsn).returncode == 0
    assert await claim(conn, a, settings) == 30
    assert einmal("accounts", "set", "a", "--quota-hour", "0", dsn=dsn).returncode == 0
    assert await claim(conn, a, settings) == 50
    wrong = einmal("accounts", "set", "a", "--quota-day", "lots", dsn=dsn)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "--quota-day" in wrong.stderr


async def test_an_accounts_rate_holds_across_claimers_and_leaves_the_others(conn: asyncpg.Connection, dsn: str) -> None:
    a, b = await two_campaigns(conn, 300)
    await conn.execute("UPDATE einmal.accounts SET send_rate = 20 WHERE name = 'a'")
    settings = Settings(database_url=dsn)
    others = [await asyncpg.connect(dsn) for _ in range(2)]
    try:
        began = await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8")
        a_slots = [
            t for i, c in enumerate([conn, *others]) for _ in range(3) for t in await slots(c, a, settings, f"n{i}")
        ]
        ended = await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8")
        b_rows = await claim(conn, b, settings)
    finally:
        for c in others:
            await c.close()
    # a's slots are 1/20 s apart, none twice, and reach at most two seconds past the last claim (a claim is let
    # in while the slots reach less than a second ahead, and takes a second's)
    assert len(set(a_slots)) == len(a_slots) >= 20, a_slots
    assert worst_window(a_slots, 1.0) <= 20, a_slots
    assert max(a_slots) <= ended + 2.0 + 0.05, (began, ended, max(a_slots))
    assert len(a_slots) <= 20 * (ended - began + 2.0) + 1
    assert b_rows == 50, "b has no rate of its own"


async def test_an_accounts_turn_is_let_in_whole(conn: asyncpg.Connection, dsn: str) -> None:
    """Under the cluster's rate a claim is let in while its slots reach less than a second ahead; the claim of an
    account's campaign right after its messages' (one turn, actors/turns.py) reaches further by what they took."""
    a, b = await two_campaigns(conn, 100)
    settings = Settings(database_url=dsn, rate_limit=20)
    # a claim takes a second of slots while they reach less than a second ahead: two let in, the pace 2 s ahead
    assert [await claim(conn, a, settings) for _ in range(2)] == [20, 20]
    assert await claim(conn, b, settings) == 0, "another claim is kept out"
    assert await claim(conn, b, settings, reach=1.5) == 20, "the same turn's next claim is let in"
    assert await claim(conn, b, settings, reach=1.5) == 0, "once"
