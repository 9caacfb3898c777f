"""A From domain removed from its account after its mail was made (docs/design.md#accounts, "The From rule"):
the claimer judges each campaign's stored From by the rule as it is when it compiles it, so a sequence's step
made before sends nothing from the removed domain to members who join after: the step pauses with the reason,
nothing reaches the relay. (Before the claimer judged it, new members got mail from the removed domain.)"""

import anyio
import asyncpg
import pytest

from tests.conftest import einmal
from tests.sequences.helpers import Stamped, join, make_sequence
from tests.support.pipeline import node_settings, recording_server, running_node

pytestmark = pytest.mark.anyio

FAST = dict(sequence_tick_seconds=0.2, sequence_wait_seconds=0.3)


async def paused(conn: asyncpg.Connection, campaign_id: int, timeout: float = 20) -> str:
    with anyio.fail_after(timeout):
        while (found := await conn.fetchrow(
            "SELECT status, pause_reason FROM einmal.campaigns WHERE id = $1", campaign_id
        ))["status"] != "paused":  # fmt: skip
            await anyio.sleep(0.1)
    return found["pause_reason"]


async def test_a_sequence_step_sends_nothing_from_a_domain_removed_from_its_account(
    conn: asyncpg.Connection, dsn: str
) -> None:
    account, list_id, _, (step,) = await make_sequence(conn, dsn, [0])  # From news@example.com
    await conn.execute(
        "INSERT INTO einmal.account_domains (account_id, domain) VALUES ($1, 'example.com'), ($1, 'acme.example')",
        account,
    )
    removed = einmal("account", "domain", "remove", "--account", "acme", "example.com", dsn=dsn)  # since the step
    assert removed.returncode == 0, removed.stderr
    received = Stamped()
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        await join(conn, account, list_id, ["a@example.org", "b@example.org"])
        reason = await paused(conn, step)
        await anyio.sleep(1)
    assert received.arrivals == []
    assert "news@example.com" in reason and "acme.example" in reason, reason
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status IN ('sent', 'sending')", step
        )
        == 0
    )
