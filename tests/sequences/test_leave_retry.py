"""A member who leaves while its step is on the wire gets no retry of it (docs/design.md#sequences): the leave
settles the rows not yet on the wire, and the claim settles a retry of a member who left, as it settles a
suppressed address's. The relay holds step 1 for a while and answers 451; the member is removed meanwhile."""

import anyio
import asyncpg
import pytest

from tests.sequences.helpers import Stamped, join, leave, make_sequence
from tests.support.pipeline import node_settings, recording_server, running_node

pytestmark = pytest.mark.anyio

FAST = dict(sequence_tick_seconds=0.2, sequence_wait_seconds=0.3, retry_base_seconds=0.5)


async def test_a_leave_while_the_relay_holds_the_step_stops_its_retry(conn: asyncpg.Connection, dsn: str) -> None:
    account, list_id, _, (step,) = await make_sequence(conn, dsn, [0])
    answers: list[str] = []

    def decide(rcpt: str) -> str | None:
        answers.append(rcpt)
        return "451 4.3.0 try again later" if len(answers) <= 3 else None  # the first tries of each, deferred

    received = Stamped(decide, delay=2.0)
    async with recording_server(received) as port, running_node(node_settings(dsn, port, **FAST)):
        members = await join(conn, account, list_id, ["a@example.org", "b@example.org", "c@example.org"])
        with anyio.fail_after(20):
            while await conn.fetchval(
                "SELECT count(*) FROM einmal.sends WHERE campaign_id = $1 AND status = 'sending'", step
            ) < 3:  # fmt: skip
                await anyio.sleep(0.05)
        for subscriber in members:  # all three leave while the relay holds their step
            await leave(conn, list_id, subscriber)
        await anyio.sleep(6)  # the 451s, then their retries' backoff and claim
    assert received.arrivals == [], "a step delivered after its member left"
    statuses = await conn.fetch("SELECT status, last_reply FROM einmal.sends WHERE campaign_id = $1", step)
    assert {(r["status"], r["last_reply"]) for r in statuses} == {("suppressed", "left the list")}, statuses
