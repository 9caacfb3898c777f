"""The send engine (docs/design.md#in-doubt-bound, #process): connections that never wait for each
other, and the in-doubt bound under group commit, with a real node SIGKILLed at
random moments."""

import random
import signal
from pathlib import Path

import anyio
import asyncpg
import pytest

from tests.support.pipeline import (
    TAKEOVER_TIMEOUT,
    Received,
    approve,
    counts,
    node_env,
    node_settings,
    recording_server,
    running_node,
    seed,
    start_node,
    stop_node,
    wait_status,
)
from tests.support.smtp_servers import FaultServer

pytestmark = pytest.mark.anyio

STALL_SECONDS = 10


class StallOne(Received):
    """The first message whose DATA arrives waits for its reply until every other message has been
    accepted, or STALL_SECONDS at most; what the others delivered meanwhile is counted."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total
        self.stalled = anyio.Event()
        self.during: int | None = None  # messages accepted between the stall's start and its end

    async def handle_DATA(self, server, session, envelope) -> str:
        if self.stalled.is_set():
            return await super().handle_DATA(server, session, envelope)
        self.stalled.set()
        before = len(self.messages)
        with anyio.move_on_after(STALL_SECONDS):
            while len(self.messages) < self.total - 1:
                await anyio.sleep(0.01)
        self.during = len(self.messages) - before
        return await super().handle_DATA(server, session, envelope)


async def test_a_connection_stalled_at_the_end_of_data_does_not_hold_the_others(
    conn: asyncpg.Connection, dsn: str
) -> None:
    total = 120
    campaign = await seed(conn, [f"w{i}@example.com" for i in range(total)])
    received = StallOne(total)
    async with (
        recording_server(received) as port,
        running_node(
            node_settings(dsn, port, smtp_connections=4, batch_size=50, smtp_timeout_seconds=3 * STALL_SECONDS)
        ),
    ):
        await approve(conn, campaign)
        await wait_status(conn, campaign, "sent", timeout=90)
    assert await counts(conn, campaign) == {"sent": total}
    # lock-step groups would let through at most the stalled message's own group (3 others)
    assert received.during == total - 1, f"{received.during} of {total - 1} delivered during the stall"
    assert len(set(received.ids())) == total


async def test_sigkill_at_random_moments_leaves_at_most_one_message_per_connection_in_doubt(
    conn: asyncpg.Connection, dsn: str, tmp_path: Path
) -> None:
    connections, kills, total = 16, 3, 1500
    campaign = await seed(conn, [f"k{i}@example.com" for i in range(total)])
    draw = random.Random(11)
    with FaultServer(seed=11) as server:
        # replies that take a while, and not all the same while: the connections drift apart, so the
        # writer's statements carry varying groups when the kill comes
        server.inject("data_end", None, delay=0.05, probability=0.3)
        server.inject("data_end", None, delay=0.01, probability=0.5)
        env = node_env(
            dsn,
            server.port,
            EINMAL_SMTP_CONNECTIONS=str(connections),
            EINMAL_BATCH_SIZE="100",
            EINMAL_NODE_TIMEOUT_SECONDS=str(TAKEOVER_TIMEOUT),
        )
        await approve(conn, campaign)
        for kill in range(kills):
            victim = start_node({**env, "EINMAL_NODE_ID": f"victim{kill}"}, tmp_path / f"victim{kill}.log")
            try:
                target = len(server.messages) + draw.randint(30, 200)
                with anyio.fail_after(60):
                    await server.arrived(target)
                sending = await conn.fetchval(
                    "SELECT count(*) FROM einmal.sends WHERE status = 'sending' AND claimed_by LIKE $1",
                    f"victim{kill}/%",
                )
                assert sending <= connections, f"{sending} rows sending at once"
            finally:
                victim.send_signal(signal.SIGKILL)
                victim.wait()
        survivor = start_node({**env, "EINMAL_NODE_ID": "survivor"}, tmp_path / "survivor.log")
        try:
            await wait_status(conn, campaign, "sent", timeout=120)
        finally:
            assert await stop_node(survivor) == 0, (tmp_path / "survivor.log").read_text()
        duplicates = server.duplicates()
        held = {m.message_id for m in server.messages}
    final = await counts(conn, campaign)
    assert set(final) <= {"sent", "in_doubt"} and sum(final.values()) == total, final
    assert final.get("in_doubt", 0) <= kills * connections, final
    assert not duplicates, f"received twice: {list(duplicates)[:5]}"
    sent = await conn.fetch(
        "SELECT subscriber_id FROM einmal.sends WHERE campaign_id = $1 AND status = 'sent'", campaign
    )
    assert {f"<campaign.{campaign}.{r['subscriber_id']}@example.com>" for r in sent} <= held
    assert len(held) - len(sent) <= final.get("in_doubt", 0), "only in-doubt rows may be held unrecorded"
    print(f"\n{kills} SIGKILLs with {connections} connections: final {final}")
